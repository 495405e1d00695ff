"""Distributed runs on machines without CUDA.

mmengine's launchers call ``torch.cuda.set_device`` and its DDP wrapper gets
``device_ids=[LOCAL_RANK]``; :func:`setup_cpu_distributed` creates a gloo
process group instead and gives DDP ``device_ids=None``.
"""
import datetime
import os
import subprocess
import time

import torch
import torch.distributed as torch_dist
from mmengine.config import ConfigDict
from mmengine.dist import is_distributed
from mmengine.registry import MODEL_WRAPPERS
from torch.nn.parallel import DistributedDataParallel

#: How long :func:`shutdown_cpu_distributed` leaves gloo's workers the GIL.
GLOO_DRAIN_SECONDS = 0.1


def _export_slurm_env(default_port=29500):
    """Set the ``env://`` variables from slurm's, as mmengine's slurm
    launcher does."""
    os.environ.setdefault('MASTER_PORT', str(default_port))
    if 'MASTER_ADDR' not in os.environ:
        node_list = os.environ['SLURM_NODELIST']
        os.environ['MASTER_ADDR'] = subprocess.getoutput(
            f'scontrol show hostname {node_list} | head -n1')
    os.environ['WORLD_SIZE'] = os.environ['SLURM_NTASKS']
    os.environ['RANK'] = os.environ['SLURM_PROCID']
    os.environ['LOCAL_RANK'] = os.environ.get('SLURM_LOCALID', '0')


def init_cpu_process_group(launcher, timeout=None):
    """Create the default process group with the gloo backend.

    Args:
        launcher (str): ``'pytorch'`` (torchrun has set ``RANK``,
            ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``) or
            ``'slurm'``.
        timeout (int | float, optional): Timeout of collectives in seconds.
            Defaults to None (PyTorch's default).
    """
    if launcher not in ('pytorch', 'slurm'):
        raise ValueError(f'Unsupported launcher {launcher!r} for a CPU run: '
                         "choose 'pytorch' or 'slurm'.")
    if launcher == 'slurm':
        _export_slurm_env()
    kwargs = {}
    if timeout is not None:
        kwargs['timeout'] = datetime.timedelta(seconds=timeout)
    torch_dist.init_process_group(backend='gloo', **kwargs)


def cpu_model_wrapper_cfg(cfg):
    """``cfg.model_wrapper_cfg`` (or the runner's default) for a module on
    the CPU: a DDP-based wrapper gets ``device_ids=None``.

    Args:
        cfg (Config): The full config.
    """
    wrapper_cfg = cfg.get('model_wrapper_cfg') or ConfigDict(
        broadcast_buffers=False,
        find_unused_parameters=cfg.get('find_unused_parameters', False))
    wrapper_cfg.setdefault('type', 'MMDistributedDataParallel')
    wrapper_type = wrapper_cfg.type
    if isinstance(wrapper_type, str):
        wrapper_type = MODEL_WRAPPERS.get(wrapper_type)
    if issubclass(wrapper_type, DistributedDataParallel):
        wrapper_cfg.device_ids = None
    return wrapper_cfg


def setup_cpu_distributed(cfg):
    """Set up a gloo process group and :func:`cpu_model_wrapper_cfg`;
    nothing for ``launcher='none'`` or where CUDA is available.

    Args:
        cfg (Config): The full config, ``launcher`` set; changed in place.
    """
    if cfg.launcher == 'none' or torch.cuda.is_available():
        return
    dist_cfg = cfg.get('env_cfg', {}).get('dist_cfg', {})
    init_cpu_process_group(cfg.launcher, dist_cfg.get('timeout'))
    cfg.model_wrapper_cfg = cpu_model_wrapper_cfg(cfg)


def shutdown_cpu_distributed():
    """End a run set up by :func:`setup_cpu_distributed`: wait for every
    rank, then destroy the gloo process group (else nothing).

    gloo's workers still need the GIL after a collective; killed at exit
    they abort the process, so a short sleep lets them finish first.
    """
    if not is_distributed() or torch_dist.get_backend() != 'gloo':
        return
    torch_dist.barrier()
    time.sleep(GLOO_DRAIN_SECONDS)
    torch_dist.destroy_process_group()
