"""A stand-in for ``mmcv._ext`` built on torchvision's operators.

Copies :mod:`mmtnt.analysis.mmcv_ops_torchvision` into an mmcv package that
has no compiled ops, as ``mmcv/_ext.py``, so that mmdet and mmseg import
and Mask R-CNN and UperNet train and test (NMS and RoIAlign computed by
torchvision); see that module for what it provides. Without ``SITE_DIR``
the mmcv that Python imports is used.

Example::

    python tools/analysis_tools/mmcv_ops_torchvision.py [SITE_DIR]
"""
import sys

from mmtnt.analysis.mmcv_ops_torchvision import main

if __name__ == '__main__':
    sys.exit(main())
