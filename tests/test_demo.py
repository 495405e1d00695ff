"""End-to-end checks of the command-line tools.

* A shortened run of the embedded Fashion-MNIST demo through
  ``tools/train.py`` and ``tools/test.py`` (a few minutes on 2 CPU cores),
  which must learn well above chance.
* ``tools/train.py`` on an ImageNet config without ImageNet must stop at
  once with a message that names ``data/imagenet``.

Both run the tools as a user does: a subprocess of the interpreter running
the tests (the project's virtual environment), from the repository root.
"""
import os.path as osp
import re

import pytest
from demo_runs import ROOT, describe, run_tool

DEMO_CONFIG = 'configs/demo/tnt-demo_1xb128_fashion-mnist.py'
TNT_CONFIG = 'configs/tnt/tnt-s-p16_16xb64_in1k.py'

# The shortened demo: 19,200 training images seen once (150 iterations of
# 128), tested on the first 2,000 test images. Chance is 10%.
SHORT_TRAIN_IMAGES = 19200
SHORT_TEST_IMAGES = 2000
MIN_SHORT_TOP1 = 50.0


def test_demo_short_run_learns(fashion_mnist, tmp_path):
    """Train the demo TNT briefly and test it with the command-line tools."""
    work_dir = str(tmp_path / 'demo')
    train_iters = SHORT_TRAIN_IMAGES // 128
    train, train_time = run_tool([
        'tools/train.py', DEMO_CONFIG, '--work-dir', work_dir,
        '--cfg-options',
        f'train_dataloader.dataset.indices={SHORT_TRAIN_IMAGES}',
        f'val_dataloader.dataset.indices={SHORT_TEST_IMAGES}',
        'train_cfg.max_epochs=1', 'train_cfg.val_interval=1',
        # the whole schedule (warm-up, then cosine) squeezed into one epoch
        'param_scheduler.0.end=0.2', 'param_scheduler.1.begin=0.2',
        'param_scheduler.1.end=1', 'param_scheduler.1.T_max=0.8',
        'default_hooks.logger.interval=20',
        'default_hooks.checkpoint.save_best=None'
    ],
                                 timeout=600)
    assert train.returncode == 0, describe(train)

    last = osp.join(work_dir, 'last_checkpoint')
    assert osp.isfile(last), f'no last_checkpoint in {work_dir}'
    with open(last) as f:
        checkpoint = f.read().strip()
    assert osp.isfile(checkpoint), checkpoint

    test, test_time = run_tool([
        'tools/test.py', DEMO_CONFIG, checkpoint, '--work-dir', work_dir,
        '--cfg-options', f'test_dataloader.dataset.indices={SHORT_TEST_IMAGES}'
    ],
                               timeout=300)
    assert test.returncode == 0, describe(test)
    found = re.findall(r'accuracy/top1: ([0-9.]+)', test.stdout + test.stderr)
    assert found, describe(test)
    top1 = float(found[-1])
    print(f'short demo: {train_iters} iterations, train {train_time:.0f} s, '
          f'test {test_time:.0f} s, top-1 {top1:.2f}% on '
          f'{SHORT_TEST_IMAGES} test images')
    assert top1 >= MIN_SHORT_TOP1, (
        f'top-1 {top1:.2f}% < {MIN_SHORT_TOP1}% after {train_iters} '
        f'iterations\n' + describe(test))


def test_train_without_imagenet_fails_fast(tmp_path):
    """A missing ImageNet is reported at once, naming the folder."""
    if osp.exists(osp.join(ROOT, 'data', 'imagenet')):
        pytest.skip('data/imagenet exists here: nothing to check')
    result, elapsed = run_tool(
        ['tools/train.py', TNT_CONFIG, '--work-dir',
         str(tmp_path / 'in1k')],
        timeout=300)
    assert result.returncode != 0, describe(result)
    assert 'data/imagenet' in result.stdout + result.stderr, describe(result)
    # "At once": before building the model and data loaders. Importing the
    # OpenMMLab stack alone takes several seconds on a loaded 2-core machine.
    assert elapsed < 60, f'took {elapsed:.0f} s to fail\n' + describe(result)
