"""Build the detection and segmentation demo datasets ("demo scenes").

Fashion-MNIST items (the Debian package ``dataset-fashion-mnist``, as for
``prepare_fashion_mnist.py``) are cut out by thresholding, coloured and
pasted onto crops of the photographs and textures that scikit-image ships
(``skimage.data``: astronaut, brick, coffee, grass, ...). Nothing is
downloaded. Every 128x128 scene holds 2 to 4 items of 4 classes (t-shirt,
trouser, sneaker, bag), drawn at 1 to 2 times their 28x28 size and in random
colours, which may hide each other a little; training scenes use
Fashion-MNIST training items, validation scenes its test items.

Two datasets are written, in the real formats of COCO and ADE20K, so that
mmdet's ``CocoDataset`` and mmseg's ``BaseSegDataset`` read them unchanged::

    OUT_DIR/coco/annotations/instances_train.json   # boxes + polygon masks
    OUT_DIR/coco/annotations/instances_val.json
    OUT_DIR/coco/train/000001.jpg ...
    OUT_DIR/coco/val/000001.jpg ...
    OUT_DIR/ade/images/training/ADE_train_00000001.jpg ...
    OUT_DIR/ade/images/validation/ADE_val_00000001.jpg ...
    OUT_DIR/ade/annotations/training/ADE_train_00000001.png ...
    OUT_DIR/ade/annotations/validation/ADE_val_00000001.png ...

COCO boxes and polygons outline the visible part of each item (what is not
hidden by items pasted later); ``area`` is its pixel count. The ADE20K label
maps follow ADE20K's convention: 0 is "other" (ignored; nothing here is
left unlabelled), 1 the scene behind the items, 2.. the item classes. With
``reduce_zero_label=True`` mmseg trains on the classes ``CLASSES_SEG``
(``background`` = 0, then the item classes).

The scenes are the same, byte for byte, on every run with the same library
versions (one seed per scene, derived from ``--seed``). A few hundred scenes
take seconds.

Usage::

    python tools/dataset_converters/make_demo_scenes.py [OUT_DIR]
    python tools/dataset_converters/make_demo_scenes.py OUT_DIR \\
        --num-train 300 --num-val 100 --seed 0 --src DIR

``OUT_DIR`` defaults to ``data/demo_scenes``. Running the script again with
the same settings does nothing when the data are complete. The work is done
by :mod:`mmtnt.datasets.demo_scenes`.
"""
import sys

from mmtnt.datasets.demo_scenes import main

if __name__ == '__main__':
    sys.exit(main())
