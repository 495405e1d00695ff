"""Running the command-line tools as a user does, for the demo tests."""
import hashlib
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from filelock import FileLock

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def run_tool(args, timeout):
    """Run ``python tools/...`` from the repository root with the
    interpreter of the tests; return the result and the wall time in
    seconds."""
    env = dict(os.environ)
    # One compute thread: PyTorch's OpenMP threads spin while they wait, so
    # two threads on a 2-core machine that is busy with anything else run
    # several times slower than one. MMTNT_TEST_THREADS overrides this.
    env['OMP_NUM_THREADS'] = os.environ.get('MMTNT_TEST_THREADS', '1')
    env['PYTHONWARNINGS'] = 'ignore'
    start = time.monotonic()
    result = subprocess.run([sys.executable, *args],
                            cwd=ROOT,
                            env=env,
                            capture_output=True,
                            text=True,
                            timeout=timeout)
    return result, time.monotonic() - start


def setup_missing(message):
    """Stop a test whose input ``tools/setup_env.sh`` installs but which is
    missing: under CI (the ``CI`` environment variable set, as CI runners
    do), where the set-up was meant to install it, the test fails;
    elsewhere it is skipped.

    Args:
        message (str): What is missing and how the set-up installs it.

    Raises:
        pytest.fail.Exception: Under CI.
        pytest.skip.Exception: Elsewhere.
    """
    ci = os.environ.get('CI', '')
    if ci.lower() not in ('', '0', 'false'):
        pytest.fail(
            f'{message} CI={ci}: the set-up was meant to install it, so the '
            'tests that need it fail instead of skipping.',
            pytrace=False)
    pytest.skip(message)


def describe(result):
    """The tail of a failed tool's output, for assertion messages."""
    out = (result.stdout + result.stderr)[-4000:]
    return f'exit status {result.returncode}; output ends with:\n{out}'


def data_options(config, scenes):
    """``--cfg-options`` that point ``config`` at the scenes in ``scenes``."""
    if 'ade' in osp.basename(config):
        root = scenes / 'ade'
        return [
            f'{split}_dataloader.dataset.data_root={root}'
            for split in ('train', 'val', 'test')
        ]
    root = scenes / 'coco'
    ann_file = root / 'annotations' / 'instances_val.json'
    return [
        f'{split}_dataloader.dataset.data_root={root}/'
        for split in ('train', 'val', 'test')
    ] + [f'{split}_evaluator.ann_file={ann_file}' for split in ('val', 'test')]


# The short runs of the demos, which the demo tests check learn and the
# image demo tests predict with: a few hundred iterations each, one to
# three minutes on 2 CPU cores. The detectors and UperNet train the first
# epochs or iterations of their schedules, still at a high learning rate:
# squeezed into them, the decay comes too early (Mask R-CNN's RPN has to
# learn first; UperNet squeezed into 300 or 500 iterations only tells the
# items from the scene, as one class: mIoU 25-28). The Fashion-MNIST TNT
# gets its whole schedule squeezed into one epoch of 12,800 images (100
# iterations: top-1 68.2% on the 2,000 test images, against the 50% that
# test_demo.py asks and 10% by chance). Each dense demo
# ends at about twice the margin test_dense_demo.py asks (measured:
# RetinaNet bbox AP50 0.41 after 6 epochs; Mask R-CNN 0.09 after 5, 0.22
# after 6, 0.48 after 7 and 0.56 after 8, against 0 untrained; UperNet mIoU 47.5 with PCPVT, 51.5 with
# PyramidTNT and 45.8 with TNT after 600 iterations, 29-34 above predicting
# the scene everywhere (17.1); 36-48 with seeds 1 and 2 instead of 0).
SHORT_EPOCHS_RETINANET = 6  # of 30
SHORT_EPOCHS_MASK_RCNN = 7  # of 20
SHORT_ITERS_UPERNET = 600  # of 2000
SHORT_TRAIN_IMAGES_FASHION_MNIST = 12800
SHORT_TEST_IMAGES_FASHION_MNIST = 2000


def short_epochs(epochs):
    """Options that stop a detection demo after its first ``epochs`` (no
    validation: tools/test.py evaluates)."""
    return [
        f'train_cfg.max_epochs={epochs}',
        f'train_cfg.val_interval={epochs + 1}',
        f'default_hooks.checkpoint.interval={epochs}'
    ]


def short_iters(iters):
    """Options that stop a segmentation demo after its first ``iters``
    iterations (no validation: tools/test.py evaluates)."""
    return [
        f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters + 1}',
        f'default_hooks.checkpoint.interval={iters}'
    ]


#: The short schedule of each dense demo, as test_dense_demo.py trains it.
SHORT_SCHEDULES = {
    'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py':
    short_epochs(SHORT_EPOCHS_RETINANET),
    'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py':
    short_epochs(SHORT_EPOCHS_MASK_RCNN),
    'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py':
    short_iters(SHORT_ITERS_UPERNET),
}
#: The size the dense demos' graphs are exported at: every demo scene's.
DEMO_GRAPH_SIZE = (128, 128)


def short_run_graph(config, scenes, short_runs, tmp_path_factory):
    """The fp32 ONNX graph (at :data:`DEMO_GRAPH_SIZE`, fixed size) of a
    dense demo's short run (:data:`SHORT_SCHEDULES`), exported once per
    test session for all pytest-xdist workers and the tests that share it.

    Returns:
        tuple[str, ShortRun, list[str]]: The graph, the run (its
        ``checkpoint``) and the ``--cfg-options`` of the demo's data.
    """
    from mmtnt.deploy import export_onnx
    data = data_options(config, scenes)
    run = short_runs.train(config, data + SHORT_SCHEDULES[config])
    name = osp.splitext(osp.basename(config))[0]
    folder = session_folder(tmp_path_factory) / 'demo_graphs' / name

    def export(folder):
        export_onnx(
            config,
            str(folder / 'fp32.onnx'),
            DEMO_GRAPH_SIZE,
            checkpoint=run.checkpoint)

    build_once(folder, export)
    return str(folder / 'fp32.onnx'), run, data


def short_fashion_mnist_run():
    """Options of the Fashion-MNIST demo's short run: one epoch of
    ``SHORT_TRAIN_IMAGES_FASHION_MNIST`` images (no validation: tools/test.py
    evaluates ``SHORT_TEST_IMAGES_FASHION_MNIST``)."""
    return [
        f'train_dataloader.dataset.indices={SHORT_TRAIN_IMAGES_FASHION_MNIST}',
        'train_cfg.max_epochs=1', 'train_cfg.val_interval=2',
        # the whole schedule (warm-up, then cosine) squeezed into one epoch
        'param_scheduler.0.end=0.2', 'param_scheduler.1.begin=0.2',
        'param_scheduler.1.end=1', 'param_scheduler.1.T_max=0.8',
        'default_hooks.logger.interval=20',
        'default_hooks.checkpoint.save_best=None'
    ]


def train_tool(config, work_dir, options, timeout=600):
    """Run ``tools/train.py config --work-dir work_dir --cfg-options
    options`` and assert it finished with a last checkpoint.

    Returns:
        tuple: The finished process, the last checkpoint's path and the
        training time in seconds.
    """
    train, seconds = run_tool([
        'tools/train.py', config, '--work-dir',
        str(work_dir), '--cfg-options', *options
    ],
                              timeout=timeout)
    assert train.returncode == 0, describe(train)
    last = Path(work_dir) / 'last_checkpoint'
    assert last.is_file(), f'no last_checkpoint in {work_dir}'
    checkpoint = last.read_text().strip()
    assert osp.isfile(checkpoint), checkpoint
    return train, checkpoint, seconds


def session_folder(tmp_path_factory):
    """The test session's temporary folder that all its pytest-xdist
    workers share (each worker's own ``getbasetemp()`` lies in it); without
    xdist, the session's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base


def build_once(folder, build):
    """Fill ``folder`` with ``build(folder)`` once in a test session, however
    many pytest-xdist workers ask for it at the same time.

    The first worker to take ``folder``'s lock builds; the others wait for
    the lock and find the folder complete. A build that failed leaves no
    mark: the next worker to ask builds again, from an empty folder.

    Args:
        folder (pathlib.Path): The folder to build, in
            :func:`session_folder`.
        build (Callable[[pathlib.Path], Any]): Fills the folder; what it
            returns must be JSON.

    Returns:
        What ``build`` returned (read back from the folder's mark by the
        workers that did not build).
    """
    mark = folder / '.built.json'
    with FileLock(f'{folder}.lock'):
        if not mark.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            mark.write_text(json.dumps(build(folder)))
        return json.loads(mark.read_text())


class ShortRun(NamedTuple):
    """A finished training run of :class:`ShortRuns`."""
    checkpoint: str
    seconds: float


class ShortRuns:
    """Training runs through ``tools/train.py``, each run once.

    The test session keeps one (the ``short_runs`` fixture) in a folder its
    pytest-xdist workers share, so that a demo trained for the test that
    checks it learns also serves the tests that predict with it, on
    whichever worker they run: the first to ask trains, the others wait
    for it (:func:`build_once`). The tests that share a run also share an
    ``xdist_group`` (:func:`short_run_group`), so that ``--dist loadgroup``
    runs them on one worker and none waits.

    Args:
        root (pathlib.Path): The folder that holds the runs' work
            directories.

    Examples:
        >>> runs = ShortRuns(tmp_path)
        >>> run = runs.train(config, ['train_cfg.max_epochs=1'])
        >>> run.checkpoint, run.seconds
    """

    def __init__(self, root):
        self.root = root

    def train(self, config, options):
        """Train ``config`` with ``--cfg-options`` ``options``, unless that
        run has been made already.

        Returns:
            ShortRun: Its last checkpoint and training time in seconds.
        """
        key = json.dumps([config, list(options)]).encode()
        name = f'{osp.splitext(osp.basename(config))[0]}-' \
            f'{hashlib.sha1(key).hexdigest()[:10]}'

        def train(work_dir):
            _, checkpoint, seconds = train_tool(config, work_dir, options)
            return [checkpoint, seconds]

        return ShortRun(*build_once(self.root / name, train))


def short_run_group(config):
    """The ``xdist_group`` mark of the tests that use ``config``'s short
    run: ``--dist loadgroup`` sends them to one worker.

    Examples:
        >>> @short_run_group(CLASSIFIER)
        ... def test_classification(short_runs):
        ...     ...
    """
    return pytest.mark.xdist_group(osp.splitext(osp.basename(config))[0])
