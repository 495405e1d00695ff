"""In-process tests of mmtnt.utils, mmtnt.engine and the command lines of
tools/train.py and tools/test.py (mmtnt.engine.cli and runner_config)."""
import argparse
import io
import os
import os.path as osp

import numpy as np
import pytest
import torch
import torch.distributed as torch_dist
from mmengine.config import Config, ConfigDict
from mmengine.logging import HistoryBuffer
from mmengine.model import BaseDataPreprocessor
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from tool_utils import BASE_CONFIG, free_port
from torch._dynamo.testing import CompileCounter

from mmtnt.engine import CompileHook, CPUAmpOptimWrapper
from mmtnt.engine.cli import parse_test_args, parse_train_args
from mmtnt.engine.runner_config import (load_config, merge_test_args,
                                        merge_train_args)
from mmtnt.utils import (check_data_paths, cpu_model_wrapper_cfg,
                         init_cpu_process_group,
                         register_checkpoint_safe_globals,
                         setup_cpu_distributed, shutdown_cpu_distributed)


def parse(parse_args, *argv):
    """Parse ``argv`` with ``parse_args`` (``parse_train_args`` or
    ``parse_test_args``)."""
    return parse_args([str(arg) for arg in argv])


# ---------------------------------------------------------------- checkpoint
def test_history_buffer_and_numpy_load_with_weights_only():
    buffer = HistoryBuffer()
    buffer.update(1.5)
    buffer.update(2.5)
    checkpoint = dict(
        meta=dict(seed=np.int64(3), score=np.float64(0.5)),
        message_hub=dict(loss=buffer, hist=np.arange(4, dtype=np.float32)))
    file = io.BytesIO()
    torch.save(checkpoint, file)
    register_checkpoint_safe_globals()
    file.seek(0)
    loaded = torch.load(file)
    assert loaded['meta']['seed'] == 3
    assert loaded['meta']['score'] == 0.5
    assert loaded['message_hub']['loss'].mean() == 2.0
    assert loaded['message_hub']['hist'].dtype == np.float32


class GetattrOf:
    """Pickles as ``getattr(owner, name)``, as a malicious file could."""

    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    def __reduce__(self):
        return getattr, (self.owner, self.name)


@pytest.mark.parametrize('owner, name', [(HistoryBuffer, '__init__'),
                                         (HistoryBuffer, 'update'),
                                         (np.ndarray, 'tofile')])
def test_getattr_stays_forbidden(owner, name):
    register_checkpoint_safe_globals()
    file = io.BytesIO()
    torch.save(dict(x=GetattrOf(owner, name)), file)
    file.seek(0)
    with pytest.raises(Exception, match='Refusing getattr'):
        torch.load(file)


def test_object_arrays_stay_forbidden():
    register_checkpoint_safe_globals()
    file = io.BytesIO()
    torch.save(dict(x=np.array([{'a': 1}], dtype=object)), file)
    file.seek(0)
    with pytest.raises(Exception, match='Weights only load failed'):
        torch.load(file)


# ---------------------------------------------------------------- data check
def dataset_cfg(tmp_path, **kwargs):
    """A config whose train dataset is ``kwargs``."""
    return Config(dict(train_dataloader=dict(dataset=kwargs)))


def test_check_data_paths_walks_wrappers(tmp_path):
    (tmp_path / 'a' / 'img').mkdir(parents=True)
    (tmp_path / 'a' / 'ann.json').write_text('{}')
    good = dict(
        type='CocoDataset',
        data_root=str(tmp_path / 'a'),
        ann_file='ann.json',
        data_prefix=dict(img='img'))
    bad = dict(good, data_prefix=dict(img='img', seg='masks'))
    cfg = dataset_cfg(
        tmp_path,
        type='RepeatDataset',
        times=2,
        dataset=dict(type='ConcatDataset', datasets=[good, bad]))
    with pytest.raises(FileNotFoundError) as error:
        check_data_paths(cfg, ['train_dataloader'])
    message = str(error.value)
    assert str(tmp_path / 'a' / 'masks') in message
    assert ('train_dataloader.dataset.dataset.datasets[1].data_prefix.seg'
            in message)
    assert 'docs/datasets.md' in message
    cfg.train_dataloader.dataset.dataset.datasets = [good]
    check_data_paths(cfg, ['train_dataloader', 'val_dataloader'])


@pytest.mark.parametrize('dataset', [
    dict(data_root='s3://bucket/imagenet', data_prefix='train'),
    dict(data_root='data/missing', download=True),
    dict(data_root='', ann_file=''),
])
def test_check_data_paths_skips_what_it_cannot_check(tmp_path, dataset):
    check_data_paths(dataset_cfg(tmp_path, **dataset), ['train_dataloader'])


def test_check_data_paths_names_missing_split(tmp_path):
    (tmp_path / 'train' / 'class_a').mkdir(parents=True)
    cfg = Config.fromfile(BASE_CONFIG)
    for name in ('train', 'val', 'test'):
        cfg[f'{name}_dataloader'].dataset.data_root = str(tmp_path)
    check_data_paths(cfg, ['train_dataloader'])
    with pytest.raises(FileNotFoundError) as error:
        check_data_paths(cfg, ['train_dataloader', 'val_dataloader'])
    assert f'"{tmp_path}/val"' in str(error.value)
    assert 'val_dataloader.dataset.data_prefix' in str(error.value)


def test_check_data_paths_absolute_ann_file(tmp_path):
    cfg = dataset_cfg(
        tmp_path, data_root=str(tmp_path), ann_file='/no/such/ann.txt')
    with pytest.raises(FileNotFoundError, match='/no/such/ann.txt'):
        check_data_paths(cfg, ['train_dataloader'])


# ---------------------------------------------------------------- distributed
def test_cpu_wrapper_cfg_drops_device_ids():
    cfg = Config(dict(find_unused_parameters=True))
    wrapper = cpu_model_wrapper_cfg(cfg)
    assert wrapper == dict(
        type='MMDistributedDataParallel',
        broadcast_buffers=False,
        find_unused_parameters=True,
        device_ids=None)
    cfg = Config(
        dict(model_wrapper_cfg=dict(type='MMSeparateDistributedDataParallel')))
    assert cpu_model_wrapper_cfg(cfg).device_ids is None
    cfg = Config(
        dict(model_wrapper_cfg=dict(type='MMFullyShardedDataParallel')))
    assert 'device_ids' not in cpu_model_wrapper_cfg(cfg)


def test_setup_cpu_distributed_leaves_single_runs_alone():
    cfg = Config(dict(launcher='none'))
    setup_cpu_distributed(cfg)
    assert not torch_dist.is_initialized()
    assert 'model_wrapper_cfg' not in cfg


def test_slurm_launcher_on_cpu(monkeypatch):
    for key in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_PORT'):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv('SLURM_PROCID', '0')
    monkeypatch.setenv('SLURM_NTASKS', '1')
    monkeypatch.setenv('SLURM_NODELIST', 'node1')
    monkeypatch.setenv('MASTER_ADDR', '127.0.0.1')
    monkeypatch.setenv('MASTER_PORT', str(free_port()))
    init_cpu_process_group('slurm', timeout=60)
    try:
        assert torch_dist.get_backend() == 'gloo'
        assert torch_dist.get_world_size() == 1
        assert os.environ['LOCAL_RANK'] == '0'
    finally:
        torch_dist.destroy_process_group()


def test_shutdown_cpu_distributed_meets_the_ranks_then_ends_the_group(
        monkeypatch):
    for key in ('SLURM_PROCID', 'SLURM_NTASKS', 'LOCAL_RANK'):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv('RANK', '0')
    monkeypatch.setenv('WORLD_SIZE', '1')
    monkeypatch.setenv('MASTER_ADDR', '127.0.0.1')
    monkeypatch.setenv('MASTER_PORT', str(free_port()))
    init_cpu_process_group('pytorch', timeout=60)
    calls = []
    barrier = torch_dist.barrier
    monkeypatch.setattr(torch_dist, 'barrier',
                        lambda: calls.append('barrier') or barrier())
    try:
        shutdown_cpu_distributed()
        assert calls == ['barrier']
        assert not torch_dist.is_initialized()
        shutdown_cpu_distributed()  # nothing left to end: does nothing
        assert calls == ['barrier']
    finally:
        if torch_dist.is_initialized():
            torch_dist.destroy_process_group()


# ---------------------------------------------------------------- CPU AMP
def test_cpu_amp_optim_wrapper_autocasts_to_bfloat16():
    model = torch.nn.Linear(4, 2)
    wrapper = CPUAmpOptimWrapper(
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    before = model.weight.detach().clone()
    with wrapper.optim_context(model):
        out = model(torch.rand(3, 4))
    assert out.dtype == torch.bfloat16
    wrapper.update_params(out.float().sum())
    assert not torch.equal(before, model.weight)
    assert 'loss_scaler' in wrapper.state_dict()


def test_cpu_amp_optim_wrapper_refuses_float16():
    model = torch.nn.Linear(4, 2)
    with pytest.raises(ValueError, match='bfloat16 only'):
        CPUAmpOptimWrapper(
            dtype='float16',
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1))


# ---------------------------------------------------------------- compile
class TinyModel(torch.nn.Module):
    """A layer and mmengine's data preprocessor, as a runner's model."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        self.data_preprocessor = BaseDataPreprocessor()


def test_compile_hook_makes_the_paramwise_optimizer_traceable():
    model = TinyModel()
    # The parameter groups as DefaultOptimWrapperConstructor builds them
    # with paramwise_cfg.
    groups = [
        ConfigDict(params=[model.linear.weight], lr=0.1),
        ConfigDict(params=[model.linear.bias], lr=0.1, weight_decay=0.)
    ]
    optimizer = torch.optim.AdamW(groups)
    runner = argparse.Namespace(
        model=model, optim_wrapper=OptimWrapper(optimizer))
    CompileHook().before_train(runner)
    assert [type(g) for g in optimizer.param_groups] == [dict, dict]
    assert optimizer.param_groups[1]['weight_decay'] == 0.
    model.linear(torch.ones(1, 2)).sum().backward()
    torch._dynamo.reset()
    # TorchDynamo fails on ConfigDict groups; the backend is beside the
    # point.
    torch.compile(optimizer.step, backend='eager')()
    torch._dynamo.reset()
    assert optimizer.state[model.linear.weight]['step'] == 1


def test_compile_hook_runs_the_data_preprocessor_eagerly():
    model = TinyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    runner = argparse.Namespace(
        model=model, optim_wrapper=OptimWrapper(optimizer))
    CompileHook().before_train(runner)
    counter = CompileCounter()
    compiled = torch.compile(model.data_preprocessor, backend=counter)
    data = compiled(dict(inputs=[torch.ones(1, 2, 2)]))
    torch._dynamo.reset()
    assert torch.equal(data['inputs'][0], torch.ones(1, 2, 2))
    assert counter.frame_count == 0


# ---------------------------------------------------------------- train.py
def train_cfg(*argv):
    """merge_train_args of tools/train.py on the tiny config."""
    args = parse(parse_train_args, BASE_CONFIG, *argv)
    return merge_train_args(Config.fromfile(BASE_CONFIG), args)


@pytest.mark.parametrize('flag', ['--local-rank', '--local_rank'])
def test_train_accepts_both_local_rank_spellings(flag, monkeypatch):
    monkeypatch.delenv('LOCAL_RANK', raising=False)
    args = parse(parse_train_args, BASE_CONFIG, flag, 1)
    assert args.local_rank == 1
    assert os.environ['LOCAL_RANK'] == '1'


def fake_device(monkeypatch, device):
    """Make torch see ``device``: ``'cpu'`` (no CUDA), ``'cuda-bf16'`` (a
    GPU with native bfloat16, Ampere on) or ``'cuda-fp16'`` (an older GPU,
    which only emulates bfloat16)."""

    def is_bf16_supported(including_emulation=True):
        return device == 'cuda-bf16' or (device == 'cuda-fp16'
                                         and including_emulation)

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: device != 'cpu')
    monkeypatch.setattr(torch.cuda, 'is_bf16_supported', is_bf16_supported)


def amp_cfg(monkeypatch, device, *argv, **optim_wrapper):
    """merge_train_args of tools/train.py on the tiny config on
    ``device``, with ``optim_wrapper`` merged into the config's."""
    fake_device(monkeypatch, device)
    args = parse(parse_train_args, BASE_CONFIG, *argv)
    cfg = Config.fromfile(BASE_CONFIG)
    cfg.optim_wrapper.update(optim_wrapper)
    return merge_train_args(cfg, args).optim_wrapper


NO_LOSS_SCALING = dict(enabled=False)


@pytest.mark.parametrize('device, wrapper_type, dtype, loss_scale', [
    ('cuda-bf16', 'AmpOptimWrapper', 'bfloat16', NO_LOSS_SCALING),
    ('cuda-fp16', 'AmpOptimWrapper', 'float16', 'dynamic'),
    ('cpu', 'mmtnt.CPUAmpOptimWrapper', 'bfloat16', None),
])
def test_train_amp_takes_bfloat16_where_the_device_has_it(
        monkeypatch, device, wrapper_type, dtype, loss_scale):
    wrapper = amp_cfg(monkeypatch, device, '--amp')
    assert wrapper.type == wrapper_type
    assert wrapper.dtype == dtype
    assert wrapper.get('loss_scale') == loss_scale


def test_train_amp_dtype_overrides_the_device_and_implies_amp(monkeypatch):
    wrapper = amp_cfg(monkeypatch, 'cuda-bf16', '--amp-dtype', 'float16')
    assert wrapper.type == 'AmpOptimWrapper'
    assert wrapper.dtype == 'float16' and wrapper.loss_scale == 'dynamic'
    wrapper = amp_cfg(monkeypatch, 'cuda-fp16', '--amp-dtype', 'bfloat16')
    assert wrapper.dtype == 'bfloat16'
    assert wrapper.loss_scale == NO_LOSS_SCALING


def test_train_amp_keeps_the_config_dtype_amp_dtype_overrides_it(
        monkeypatch):
    config = dict(type='AmpOptimWrapper', dtype='float16', loss_scale=512.)
    wrapper = amp_cfg(monkeypatch, 'cuda-bf16', '--amp', **config)
    assert wrapper.dtype == 'float16' and wrapper.loss_scale == 512.
    wrapper = amp_cfg(monkeypatch, 'cuda-bf16', '--amp', '--amp-dtype',
                      'bfloat16', **config)
    assert wrapper.dtype == 'bfloat16'
    assert wrapper.loss_scale == NO_LOSS_SCALING
    wrapper = amp_cfg(monkeypatch, 'cuda-fp16', '--amp', dtype='bfloat16')
    assert wrapper.dtype == 'bfloat16'
    # The CPU wrapper takes no loss_scale.
    wrapper = amp_cfg(monkeypatch, 'cpu', '--amp', loss_scale=512.)
    assert 'loss_scale' not in wrapper


@pytest.mark.parametrize('argv, optim_wrapper', [
    (['--amp-dtype', 'float16'], {}),
    (['--amp'], dict(dtype='float16')),
])
def test_train_amp_float16_on_the_cpu_is_refused(monkeypatch, argv,
                                                 optim_wrapper):
    with pytest.raises(ValueError, match='CPU takes bfloat16 only'):
        amp_cfg(monkeypatch, 'cpu', *argv, **optim_wrapper)


def test_train_tool_exits_with_the_amp_error(monkeypatch):
    fake_device(monkeypatch, 'cpu')
    args = parse(parse_train_args, BASE_CONFIG, '--amp-dtype', 'float16')
    message = "^tools/train.py: .*got 'float16'.*--amp-dtype b"
    with pytest.raises(SystemExit, match=message):
        load_config(args)


def test_amp_optim_wrapper_without_loss_scaling_is_a_pass_through(
        monkeypatch):
    wrapper_cfg = amp_cfg(monkeypatch, 'cuda-bf16', '--amp')
    model = torch.nn.Linear(4, 2)
    wrapper = AmpOptimWrapper(
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        dtype=wrapper_cfg.dtype,
        loss_scale=wrapper_cfg.loss_scale)
    assert wrapper.cast_dtype == torch.bfloat16
    before = model.weight.detach().clone()
    loss = model(torch.ones(1, 4)).sum()
    assert wrapper.loss_scaler.scale(loss) is loss
    wrapper.update_params(loss)
    assert torch.allclose(model.weight, before - 0.1)
    assert wrapper.state_dict()['loss_scaler'] == {}


def compile_hooks(cfg):
    return [h for h in cfg.get('custom_hooks', [])
            if h['type'] == 'mmtnt.CompileHook']


def test_train_compile_sets_the_runner_option():
    cfg = train_cfg()
    assert 'compile' not in cfg and not compile_hooks(cfg)
    cfg = train_cfg('--compile', '--amp')
    assert cfg.compile is True and len(compile_hooks(cfg)) == 1
    assert cfg.optim_wrapper.type.endswith('AmpOptimWrapper')
    # The hook comes with compile=True from anywhere.
    cfg = train_cfg('--cfg-options', 'compile=True')
    assert len(compile_hooks(cfg)) == 1
    # torch.compile arguments of the config are kept; --cfg-options wins.
    args = parse(parse_train_args, BASE_CONFIG, '--compile')
    config = Config.fromfile(BASE_CONFIG)
    config.compile = dict(mode='max-autotune')
    assert merge_train_args(config, args).compile == dict(
        mode='max-autotune')
    cfg = train_cfg('--compile', '--cfg-options',
                    'compile=False')
    assert cfg.compile is False and not compile_hooks(cfg)


def test_train_merge_args(tmp_path):
    cfg = train_cfg()
    assert cfg.work_dir == './work_dirs/tnt_tiny_cls'
    assert cfg.launcher == 'none' and not cfg.resume
    assert not cfg.auto_scale_lr.get('enable', False)
    cfg = train_cfg('--resume', '--work-dir', tmp_path,
                    '--launcher', 'pytorch', '--auto-scale-lr')
    assert cfg.resume and cfg.load_from is None
    assert cfg.work_dir == str(tmp_path) and cfg.launcher == 'pytorch'
    assert cfg.auto_scale_lr.enable
    cfg = train_cfg('--resume', 'ckpt.pth', '--cfg-options',
                    'train_cfg.max_epochs=7')
    assert cfg.resume and cfg.load_from == 'ckpt.pth'
    assert cfg.train_cfg.max_epochs == 7


def test_train_auto_scale_lr_needs_base_batch_size():
    args = parse(parse_train_args, BASE_CONFIG, '--auto-scale-lr')
    cfg = Config.fromfile(BASE_CONFIG)
    cfg.auto_scale_lr = dict(enable=False)
    with pytest.raises(ValueError, match='base_batch_size'):
        merge_train_args(cfg, args)


# ---------------------------------------------------------------- test.py
def merged_test_cfg(scope, *argv, **extra):
    """merge_test_args of tools/test.py on the tiny config, in ``scope``."""
    args = parse(parse_test_args, BASE_CONFIG, 'ckpt.pth', *argv)
    cfg = Config.fromfile(BASE_CONFIG)
    cfg.default_scope = scope
    cfg.merge_from_dict(extra)
    return merge_test_args(cfg, args)


def test_test_merge_args_show_dir_per_task():
    cfg = merged_test_cfg('mmpretrain', '--show-dir', 'vis')
    assert cfg.load_from == 'ckpt.pth'
    hook = cfg.default_hooks.visualization
    assert hook.enable and hook.interval == 1
    assert hook.out_dir == osp.join(os.getcwd(), 'vis')
    cfg = merged_test_cfg('mmdet', '--show-dir', 'vis')
    assert cfg.default_hooks.visualization.draw
    assert cfg.default_hooks.visualization.test_out_dir == osp.abspath('vis')
    cfg = merged_test_cfg('mmseg', '--show-dir', 'vis')
    assert cfg.default_hooks.visualization.draw
    assert cfg.visualizer.save_dir == osp.abspath('vis')


def test_test_merge_args_tta():
    cfg = merged_test_cfg('mmpretrain', '--tta')
    assert cfg.model.type == 'mmpretrain.AverageClsScoreTTA'
    assert cfg.model.module.type == 'ImageClassifier'
    pipeline = cfg.test_dataloader.dataset.pipeline
    assert pipeline[-1].type == 'TestTimeAug'
    assert pipeline[-1].transforms[1] == [dict(type='PackInputs')]
    cfg = merged_test_cfg('mmdet', '--tta')
    assert cfg.model.type == 'mmdet.DetTTAModel'
    with pytest.raises(ValueError, match='tta_model'):
        merged_test_cfg('mmseg', '--tta')
    tta_pipeline = [dict(type='LoadImageFromFile'), dict(type='Mine')]
    cfg = merged_test_cfg(
        'mmseg',
        '--tta',
        tta_model=dict(type='SegTTAModel'),
        tta_pipeline=tta_pipeline)
    assert cfg.model.type == 'SegTTAModel'
    assert cfg.test_dataloader.dataset.pipeline == tta_pipeline


def test_test_rejects_unknown_scope():
    with pytest.raises(ValueError, match='default_scope'):
        merged_test_cfg('mmengine', '--show-dir', 'vis')
