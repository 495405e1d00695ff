"""Build the detection and segmentation demo datasets ("demo scenes").

Fashion-MNIST items pasted onto pictures that scikit-image ships, written
as a COCO and an ADE20K dataset; nothing is downloaded. What the datasets
hold is in :mod:`mmtnt.datasets.demo_scenes`.

Usage::

    python tools/dataset_converters/make_demo_scenes.py [OUT_DIR]
    python tools/dataset_converters/make_demo_scenes.py OUT_DIR \\
        --num-train 300 --num-val 100 --seed 0 --src DIR

``OUT_DIR`` defaults to ``data/demo_scenes``. Running the script again with
the same settings does nothing when the data are complete. The work is done
by :mod:`mmtnt.datasets.demo_scenes`.
"""
import sys

from mmtnt.datasets.cli import demo_scenes_main

if __name__ == '__main__':
    sys.exit(demo_scenes_main())
