"""Helpers of the tool tests: tiny images, configs, tool runs, checks."""
import os
import os.path as osp
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from mmtnt.utils import register_checkpoint_safe_globals

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / 'tools'
HOOKS_DIR = Path(__file__).resolve().parent
CONFIGS = REPO / 'tests' / 'data' / 'configs'
BASE_CONFIG = CONFIGS / 'tnt_tiny_cls.py'
SEG_CONFIG = CONFIGS / 'tnt_tiny_seg.py'
NUM_TRAIN = 16
NUM_VAL = 8


def write_images(folder, count, seed):
    """Write ``count`` 32x32 PNGs, half in ``class_a`` (dark), half bright.

    Args:
        folder (Path): Split folder to create.
        count (int): Number of images.
        seed (int): Seed of the pixel noise.
    """
    rng = np.random.default_rng(seed)
    for i in range(count):
        label = i % 2
        pixels = rng.integers(0, 128, (32, 32, 3)) + 127 * label
        class_dir = folder / ('class_a', 'class_b')[label]
        class_dir.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels.astype(np.uint8)).save(class_dir / f'{i}.png')


def write_config(path, data_root, extra='', base=BASE_CONFIG):
    """Write a config that reads ``data_root`` on top of a tiny config.

    Args:
        path (Path): The config file to write.
        data_root (Path | str): Dataset root for all three dataloaders.
        extra (str): Config lines appended at the end.
        base (Path): The config to build on. Defaults to ``BASE_CONFIG``.

    Returns:
        Path: ``path``.
    """
    loaders = '\n'.join(
        f"{name}_dataloader = dict(dataset=dict(data_root='{data_root}'))"
        for name in ('train', 'val', 'test'))
    path.write_text(f"_base_ = '{base}'\n{loaders}\n{extra}\n")
    return path


def tool_env():
    """Environment of tool runs: the venv first, the test hooks importable.

    One thread per process: the tiny model trains faster so, and runs stay
    quick when other processes load the CPU.
    """
    env = dict(os.environ, OMP_NUM_THREADS='1')
    env['PATH'] = osp.dirname(sys.executable) + os.pathsep + env['PATH']
    env['PYTHONPATH'] = os.pathsep.join(
        filter(None, [str(HOOKS_DIR), env.get('PYTHONPATH')]))
    return env


def run_tool(*args, timeout=300):
    """Run ``tools/<args[0]>`` with the arguments after it.

    ``.py`` tools run with the interpreter of the tests, ``.sh`` ones with
    bash. The output is echoed when the run fails.

    Returns:
        subprocess.CompletedProcess: With ``stdout`` and ``stderr`` as text.
    """
    tool = TOOLS / args[0]
    launcher = [sys.executable] if tool.suffix == '.py' else ['bash']
    command = launcher + [str(tool)] + [str(arg) for arg in args[1:]]
    result = subprocess.run(
        command,
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=timeout)
    if result.returncode != 0:
        print(result.stdout[-5000:], result.stderr[-5000:], sep='\n')
    return result


def free_port():
    """Return a TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def load_checkpoint(path):
    """``torch.load`` with torch's default ``weights_only=True``."""
    register_checkpoint_safe_globals()
    return torch.load(path)


def assert_same_tensors(expected, actual):
    """Assert two (nested) state dicts hold bitwise equal tensors."""
    assert type(expected) is type(actual)
    if isinstance(expected, dict):
        assert expected.keys() == actual.keys()
        for key in expected:
            assert_same_tensors(expected[key], actual[key])
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual)
        for x, y in zip(expected, actual):
            assert_same_tensors(x, y)
    elif isinstance(expected, torch.Tensor):
        assert torch.equal(expected, actual)
    else:
        assert expected == actual
