"""mmseg's confusion matrix for configs that name their classes and reduce
the zero label, as ADE20K's and mmtnt's demo configs do (the work of
``tools/analysis_tools/seg_confusion_matrix.py``).

mmseg's ``confusion_matrix.py`` reads the class names from the dataset
class, empty when the config gives them, and lowers labels the test
pipeline has lowered already (open-mmlab/mmsegmentation#1687). :func:`main`
runs its own functions, loaded from the script's file
(:func:`load_upstream`), on labels and predictions in the same range.

Examples:
    >>> upstream = load_upstream()
    >>> dataset = upstream.DATASETS.build(cfg.test_dataloader.dataset)
    >>> matrix = upstream.calculate_confusion_matrix(
    ...     DatasetView(dataset),
    ...     read_predictions('work_dirs/preds', dataset.reduce_zero_label))
"""
import importlib.util
import os
import os.path as osp
import sys

import mmseg
import numpy as np
from mmengine.config import Config
from PIL import Image

UPSTREAM = osp.join(
    osp.dirname(mmseg.__file__), '.mim', 'tools', 'analysis_tools',
    'confusion_matrix.py')


def load_upstream():
    """Import mmseg's script (what ``mim run mmseg confusion_matrix``
    runs) as a module."""
    spec = importlib.util.spec_from_file_location('mmseg_confusion_matrix',
                                                  UPSTREAM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DatasetView:
    """A dataset as mmseg's ``calculate_confusion_matrix`` reads it: the
    class names of its ``metainfo``, and its labels as the test pipeline
    loads them (already reduced where ``reduce_zero_label`` is set).

    Args:
        dataset (BaseSegDataset): The test dataset.
    """
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
    """The label maps in ``folder``, sorted by name, in the classes' range
    (``IoUMetric`` writes them one higher for ``reduce_zero_label``)."""
    shift = 1 if reduce_zero_label else 0
    return [
        np.array(Image.open(osp.join(folder, name))) - shift
        for name in sorted(os.listdir(folder))
    ]


def parse_upstream_args(upstream, argv):
    """Parse ``argv`` with the upstream script's ``parse_args`` (which
    reads ``sys.argv``)."""
    if argv is None:
        return upstream.parse_args()
    saved = sys.argv
    sys.argv = [UPSTREAM, *map(str, argv)]
    try:
        return upstream.parse_args()
    finally:
        sys.argv = saved


def main(argv=None):
    """Run the command line of mmseg's script (its options) on
    ``argv`` (``sys.argv`` when None)."""
    upstream = load_upstream()
    args = parse_upstream_args(upstream, argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
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
