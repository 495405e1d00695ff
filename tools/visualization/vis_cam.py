"""Draw the class activation map (CAM) of an mmtnt classifier on an image.

The image goes through the config's test pipeline, as in testing; the map
of the chosen class (``pytorch_grad_cam``, the ``grad-cam`` package) is laid
on the backbone's token grids, drawn over the image and saved as a PNG. The
work is done by :mod:`mmtnt.visualization` (its command line:
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
