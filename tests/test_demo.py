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
from demo_runs import (ROOT, SHORT_TEST_IMAGES_FASHION_MNIST,
                       SHORT_TRAIN_IMAGES_FASHION_MNIST, describe, run_tool,
                       short_fashion_mnist_run, short_run_group)

DEMO_CONFIG = 'configs/demo/tnt-demo_1xb128_fashion-mnist.py'
TNT_CONFIG = 'configs/tnt/tnt-s-p16_16xb64_in1k.py'

# The shortened demo (``demo_runs.short_fashion_mnist_run``): 12,800
# training images seen once (100 iterations of 128), tested on the first
# 2,000 test images. Chance is 10%.
MIN_SHORT_TOP1 = 50.0


@pytest.mark.slow
@short_run_group(DEMO_CONFIG)
def test_demo_short_run_learns(fashion_mnist, short_runs, tmp_path):
    """Train the demo TNT briefly and test it with the command-line tools."""
    run = short_runs.train(DEMO_CONFIG, short_fashion_mnist_run())
    test, test_time = run_tool([
        'tools/test.py', DEMO_CONFIG, run.checkpoint, '--work-dir',
        str(tmp_path), '--cfg-options',
        f'test_dataloader.dataset.indices={SHORT_TEST_IMAGES_FASHION_MNIST}'
    ],
                               timeout=300)
    assert test.returncode == 0, describe(test)
    found = re.findall(r'accuracy/top1: ([0-9.]+)', test.stdout + test.stderr)
    assert found, describe(test)
    top1 = float(found[-1])
    train_iters = SHORT_TRAIN_IMAGES_FASHION_MNIST // 128
    print(f'short demo: {train_iters} iterations, train {run.seconds:.0f} s, '
          f'test {test_time:.0f} s, top-1 {top1:.2f}% on '
          f'{SHORT_TEST_IMAGES_FASHION_MNIST} test images')
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
