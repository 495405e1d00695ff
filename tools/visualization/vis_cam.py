"""Draw the class activation map (CAM) of an mmtnt classifier on an image.

The image goes through the config's test pipeline and data preprocessor, as
in testing; ``pytorch_grad_cam`` (the ``grad-cam`` package) weighs the
outputs of the target layers by the gradients of the chosen class score (or
without gradients, for Eigen-CAM); the map, as large as the transformed
image, is drawn over it and saved as a PNG.

The backbones emit tokens, which are laid out as maps on the token grids
that every mmtnt backbone declares for the input size; where a backbone
padded the image, the map is resampled to the image's own extent. The work
is done by :mod:`mmtnt.visualization` (the command line:
:mod:`mmtnt.visualization.cli`).

Examples::

    python tools/visualization/vis_cam.py shirt.png \\
        configs/demo/tnt-demo_1xb128_fashion-mnist.py \\
        work_dirs/demo/epoch_4.pth --save-path cam.png
    python tools/visualization/vis_cam.py cat.jpg \\
        configs/twins/twins-svt-s_16xb64_in1k.py svt-s.pth \\
        --method layercam --target-layers "backbone.stages[-2].norm" \\
        --target-category 281 282 --save-path cam.png
"""
from mmtnt.visualization.cli import main

if __name__ == '__main__':
    main()
