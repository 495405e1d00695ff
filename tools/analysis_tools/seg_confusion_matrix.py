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

The work is done by :mod:`mmtnt.analysis.seg_confusion`.
"""
from mmtnt.analysis.seg_confusion import main

if __name__ == '__main__':
    main()
