"""mmseg's confusion matrix for configs that name their classes and reduce
the zero label (``tools/analysis_tools/seg_confusion_matrix.py``).

mmseg's script reads empty class names for such configs and lowers labels
twice (open-mmlab/mmsegmentation#1687): :func:`main` runs its functions on
labels and predictions in the same range.
"""
import importlib.util
import os
import os.path as osp
import sys

import mmseg
import numpy as np
from PIL import Image

from ..utils.cli import load_config

UPSTREAM = osp.join(
    osp.dirname(mmseg.__file__), '.mim', 'tools', 'analysis_tools',
    'confusion_matrix.py')


def load_upstream():
    """Import mmseg's ``confusion_matrix.py`` as a module."""
    spec = importlib.util.spec_from_file_location('mmseg_confusion_matrix',
                                                  UPSTREAM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DatasetView:
    """A dataset as mmseg's ``calculate_confusion_matrix`` reads it: its
    ``metainfo`` classes, and labels already reduced by the pipeline."""
    reduce_zero_label = False

    def __init__(self, dataset):
        self.dataset = dataset
        self.METAINFO = dataset.metainfo
        self.ignore_index = dataset.ignore_index

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        return self.dataset[index]


def read_predictions(folder, reduce_zero_label):
    """The label maps in ``folder``, by name, in the classes' range."""
    shift = 1 if reduce_zero_label else 0
    return [
        np.array(Image.open(osp.join(folder, name))) - shift
        for name in sorted(os.listdir(folder))
    ]


def parse_upstream_args(upstream, argv):
    """Parse ``argv`` with the script's ``parse_args`` (reads
    ``sys.argv``)."""
    if argv is None:
        return upstream.parse_args()
    saved = sys.argv
    sys.argv = [UPSTREAM, *map(str, argv)]
    try:
        return upstream.parse_args()
    finally:
        sys.argv = saved


def main(argv=None):
    """Run mmseg's script's command line on ``argv`` (else ``sys.argv``)."""
    upstream = load_upstream()
    args = parse_upstream_args(upstream, argv)
    cfg = load_config(args.config, args.cfg_options)
    dataset = upstream.DATASETS.build(cfg.test_dataloader.dataset)
    results = read_predictions(args.prediction_path,
                               dataset.reduce_zero_label)
    matrix = upstream.calculate_confusion_matrix(
        DatasetView(dataset), results)
    upstream.plot_confusion_matrix(
        matrix,
        dataset.metainfo['classes'],
        save_dir=args.save_dir,
        show=args.show,
        title=args.title,
        color_theme=args.color_theme)
