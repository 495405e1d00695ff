"""The ImageNet configs of TNT and PyramidTNT train as the official runs.

* The lr of every iteration of the 310 epochs, from the schedulers mmengine
  builds from the config, is the lr of timm's ``CosineLRScheduler`` built
  with the official hyperparameters (tnt_pytorch/readme.md of
  huawei-noah/Efficient-AI-Backbones, timm 0.3 ``create_scheduler``:
  ``t_initial=300``, ``lr_min=1e-5``, ``warmup_lr_init=1e-6``, 20 warm-up
  epochs for PyramidTNT and 5 for TNT, 10 cool-down epochs), stepped once
  per epoch as their ``train.py`` does: constant within an epoch.
* PyramidTNT's EMA averages the stem's BatchNorm statistics, as timm's
  ``ModelEma`` does, instead of copying the live ones.
"""
import glob
import os.path as osp
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import HOOKS, PARAM_SCHEDULERS, init_default_scope
from timm.scheduler import CosineLRScheduler
from torch import nn

CONFIG_ROOT = osp.join(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'configs')
PYRAMID_TNT_S = 'pyramid_tnt/pyramid-tnt-s_8xb128_in1k-256px.py'
# (config, official --warmup-epochs)
SCHEDULES = [(PYRAMID_TNT_S, 20), ('tnt/tnt-s-p16_16xb64_in1k.py', 5)]
# Iterations per epoch of the simulated run: a few are enough to see
# whether the lr moves within an epoch.
EPOCH_LENGTH = 3


def load(rel_path):
    """The config, with its default scope set as the runner sets it."""
    cfg = Config.fromfile(osp.join(CONFIG_ROOT, rel_path))
    init_default_scope(cfg.default_scope)
    return cfg


def build_schedulers(cfg, optimizer):
    """The config's param schedulers on ``optimizer``, as the runner builds
    them."""
    schedulers = []
    for scheduler in cfg.param_scheduler:
        args = dict(optimizer=optimizer)
        if scheduler.get('convert_to_iter_based', False):
            args['epoch_length'] = EPOCH_LENGTH
        schedulers.append(PARAM_SCHEDULERS.build(scheduler, default_args=args))
    return schedulers


def mmengine_lrs(cfg):
    """The lr of each iteration of each epoch: one list per epoch."""
    weight = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=cfg.optim_wrapper.optimizer.lr)
    schedulers = build_schedulers(cfg, optimizer)
    lrs = []
    for _ in range(cfg.train_cfg.max_epochs):
        lrs.append([])
        for _ in range(EPOCH_LENGTH):
            lrs[-1].append(optimizer.param_groups[0]['lr'])
            optimizer.step()
            for scheduler in schedulers:
                if not scheduler.by_epoch:
                    scheduler.step()
        for scheduler in schedulers:
            if scheduler.by_epoch:
                scheduler.step()
    return lrs


def official_lrs(warmup_epochs, epochs):
    """The lr of each epoch of timm's scheduler in the official runs."""
    weight = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=1e-3)
    scheduler = CosineLRScheduler(
        optimizer,
        t_initial=300,
        lr_min=1e-5,
        warmup_t=warmup_epochs,
        warmup_lr_init=1e-6,
        cycle_limit=1,
        t_in_epochs=True)
    lrs = []
    for epoch in range(epochs):
        scheduler.step(epoch)
        lrs.append(optimizer.param_groups[0]['lr'])
    return lrs


@pytest.mark.parametrize('rel_path,warmup_epochs', SCHEDULES)
def test_lr_of_every_iteration_is_the_official_one(rel_path, warmup_epochs):
    cfg = load(rel_path)
    assert cfg.train_cfg.max_epochs == 310  # 300 + 10 cool-down epochs
    official = official_lrs(warmup_epochs, 310)
    lrs = mmengine_lrs(cfg)
    first_iterations = [epoch[0] for epoch in lrs]
    # warm-up start and end, mid-cosine, last cosine epoch, cool-down
    for epoch in (0, warmup_epochs - 1, warmup_epochs, 150, 299, 305):
        assert first_iterations[epoch] == pytest.approx(
            official[epoch], rel=1e-9), epoch
    assert first_iterations == pytest.approx(official, rel=1e-9)
    assert all(epoch == [epoch[0]] * EPOCH_LENGTH for epoch in lrs)


def test_every_pyramid_tnt_ema_averages_buffers():
    paths = glob.glob(osp.join(CONFIG_ROOT, 'pyramid_tnt', '*_in1k-*px.py'))
    assert len(paths) == 4
    for path in paths:
        hook, = Config.fromfile(path).custom_hooks
        assert (hook.type, hook.get('update_buffers')) == ('EMAHook', True)


def test_pyramid_tnt_ema_averages_the_batchnorm_statistics():
    hook_cfg, = load(PYRAMID_TNT_S).custom_hooks  # mmpretrain's EMAHook
    hook_cfg.pop('priority')  # the runner's, not the hook's argument
    hook = HOOKS.build(hook_cfg)
    assert hook.ema_cfg.get('update_buffers') is True
    # What the hook does around each train iteration, on a BatchNorm.
    model = nn.BatchNorm1d(1)
    hook.before_run(SimpleNamespace(model=model))
    model(torch.full((2, 1), 4.0))  # running_mean 0.4
    hook.ema_model.update_parameters(model)  # the first update copies
    model(torch.full((2, 1), 8.0))  # running_mean 1.16
    hook.ema_model.update_parameters(model)
    ema_mean = hook.ema_model.module.running_mean.item()
    assert ema_mean == pytest.approx(0.4 + 4e-5 * (1.16 - 0.4))
