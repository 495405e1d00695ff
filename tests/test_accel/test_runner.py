"""``accelerate_runner``: what tools/train.py and tools/test.py apply, and
the switches that turn it off."""
from types import SimpleNamespace

import pytest
import torch.nn as nn
from mmengine.config import Config

from mmtnt.accel import accelerate_runner, is_accelerated
from mmtnt.models.layers import Mlp


def runner_with(model, **cfg):
    return SimpleNamespace(model=model, cfg=Config(cfg))


def test_applied_on_the_cpu():
    runner = runner_with(nn.Sequential(Mlp(4, 8)))
    assert accelerate_runner(runner)
    assert is_accelerated(runner.model)


@pytest.mark.parametrize('cfg', [dict(cpu_accel=False), dict(compile=True)])
def test_switched_off_by_the_config(cfg):
    runner = runner_with(nn.Sequential(Mlp(4, 8)), **cfg)
    assert not accelerate_runner(runner)
    assert not is_accelerated(runner.model)


def test_not_applied_on_another_device():
    runner = runner_with(nn.Sequential(Mlp(4, 8)).to('meta'))
    assert not accelerate_runner(runner)
    assert not is_accelerated(runner.model)
