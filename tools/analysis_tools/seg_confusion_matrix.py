"""mmseg's confusion matrix for configs that name their classes and reduce
the zero label, as ADE20K's and mmtnt's demo configs do.

mmseg 1.2's ``tools/analysis_tools/confusion_matrix.py`` (``mim run mmseg
confusion_matrix``) fails on them: it reads the class names from the dataset
class (``METAINFO``), which ``BaseSegDataset`` leaves empty when the config
gives them (``KeyError: 'classes'``), and with ``reduce_zero_label=True`` it
lowers the labels the test pipeline has already lowered, while the
predictions that ``IoUMetric(output_dir=...)`` writes are raised by one
(open-mmlab/mmsegmentation#1687). This script runs mmseg's own
``calculate_confusion_matrix`` and ``plot_confusion_matrix``, with the same
arguments, on the labels and predictions in the same range.

Examples::

    python tools/test.py CONFIG CHECKPOINT --cfg-options \\
        test_evaluator.output_dir=work_dirs/preds \\
        test_evaluator.keep_results=True
    python tools/analysis_tools/seg_confusion_matrix.py CONFIG \\
        work_dirs/preds work_dirs/confusion_matrix
"""
import importlib.util
import os
import os.path as osp

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


def main():
    upstream = load_upstream()
    args = upstream.parse_args()
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


if __name__ == '__main__':
    main()
