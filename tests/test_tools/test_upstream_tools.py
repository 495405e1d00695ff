"""The OpenMMLab analysis tools on mmtnt's demo configs, as ``mim run``
runs them: mmpretrain's confusion_matrix, analyze_results, browse_dataset
and print_config, mmdet's analyze_results and browse_dataset, and mmseg's
confusion matrix (through tools/analysis_tools/seg_confusion_matrix.py,
which mends mmseg's script for these configs).

The models are randomly initialised (a checkpoint saved here, no training):
the tools must run and write their outputs, not find good numbers. One tool
runs through the ``mim`` command in a fresh process, where nothing imports
mmtnt by hand: the ``mmtnt.`` types resolve through the registry. The others
run the same scripts in this process, which saves starting one per tool.
"""
import importlib.util
import runpy
import subprocess
import sys
from pathlib import Path

import mmengine
import numpy as np
import pytest
import torch
from demo_runs import data_options
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope
from PIL import Image
from tool_utils import REPO, TOOLS, tool_env

from mmtnt.analysis import seg_confusion

DEMOS = REPO / 'configs' / 'demo'
FM_DEMO = DEMOS / 'tnt-demo_1xb128_fashion-mnist.py'
DET_DEMO = DEMOS / 'retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
SEG_DEMO = DEMOS / 'upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
# mmpretrain's FashionMNIST warns once per image it loads.
pytestmark = pytest.mark.filterwarnings(
    'ignore:__array__ implementation:DeprecationWarning')
# Small subsets, loaded in this process.
NUM_CLS, NUM_DENSE = 20, 4
LOADERS = [
    f'{split}_dataloader.{key}'
    for split in ('train', 'test')
    for key in ('num_workers=0', 'persistent_workers=False')
]
CLS_OPTIONS = [f'test_dataloader.dataset.indices={NUM_CLS}'] + LOADERS


def upstream_tool(package, name):
    """The script that ``mim run PACKAGE NAME`` runs: ``NAME.py`` under
    the installed package's ``.mim/tools``, the least nested one where
    there are several (mmdet's ``browse_dataset`` is also under ``mot/``).
    """
    spec = importlib.util.find_spec(package)
    tools = Path(spec.origin).parent / '.mim' / 'tools'
    scripts = sorted(tools.rglob(f'{name}.py'), key=lambda p: len(p.parts))
    assert scripts, f'mim run {package} {name} finds no script'
    return scripts[0]


def run_script(script, *args):
    """Run ``script`` with ``args`` as its command line, in this process,
    from the repository root; the default scope it sets is undone (also
    in module fixtures, which tests/conftest.py's fixture does not see)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DefaultScope, '_instance_dict',
                      DefaultScope._instance_dict.copy())
        patch.setattr(sys, 'argv', [str(script), *map(str, args)])
        patch.setenv('LOCAL_RANK', '0')
        patch.chdir(REPO)
        runpy.run_path(str(script), run_name='__main__')


def save_random_checkpoint(config, path):
    """Save the initialised weights of ``config``'s model to ``path``."""
    cfg = Config.fromfile(config)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(cfg.model)
    model.init_weights()
    torch.save(dict(state_dict=model.state_dict()), path)
    return path


@pytest.fixture(scope='module')
def cls_run(tmp_path_factory, fashion_mnist):
    """A random checkpoint of the Fashion-MNIST demo, and its predictions
    on the first test images (``tools/test.py --out``)."""
    out = tmp_path_factory.mktemp('cls_run')
    checkpoint = save_random_checkpoint(FM_DEMO, out / 'random.pth')
    run_script(TOOLS / 'test.py', FM_DEMO, checkpoint, '--work-dir', out,
               '--out', out / 'preds.pkl', '--cfg-options', *CLS_OPTIONS)
    return out


def test_mmpretrain_confusion_matrix_through_mim(cls_run):
    """From the checkpoint: the upstream script builds the model."""
    out = cls_run / 'confusion'
    result = subprocess.run([
        str(Path(sys.executable).parent / 'mim'), 'run', 'mmpretrain',
        'confusion_matrix', FM_DEMO, cls_run / 'random.pth', '--out',
        f'{out}.pkl', '--show-path', f'{out}.png', '--cfg-options',
        *CLS_OPTIONS
    ],
                            cwd=REPO,
                            env=dict(tool_env(), MPLBACKEND='Agg'),
                            capture_output=True,
                            text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    matrix = mmengine.load(f'{out}.pkl')
    assert matrix.shape == (10, 10) and matrix.sum() == NUM_CLS
    assert Path(f'{out}.png').stat().st_size > 0


def test_mmpretrain_analyze_results(cls_run):
    out = cls_run / 'analyze'
    run_script(
        upstream_tool('mmpretrain', 'analyze_results'), FM_DEMO,
        cls_run / 'preds.pkl', '--out-dir', out, '--topk', NUM_CLS,
        '--cfg-options', *CLS_OPTIONS)
    # Every prediction lands in one folder, drawn and listed (the JSON
    # lists the fields of each prediction, not its index).
    drawn = []
    for kind in ('success', 'fail'):
        entries = mmengine.load(out / kind / f'{kind}.json')
        pngs = {int(png.stem) for png in (out / kind).glob('*.png')}
        assert all('pred_label' in entry for entry in entries)
        assert len(entries) >= len(pngs)
        drawn += pngs
    assert sorted(drawn) == list(range(NUM_CLS))


def test_mmpretrain_browse_dataset(tmp_path, fashion_mnist):
    run_script(
        upstream_tool('mmpretrain', 'browse_dataset'), FM_DEMO,
        '--output-dir', tmp_path, '--not-show', '--show-number', 2,
        '--phase', 'test', '--mode', 'original', '--cfg-options',
        *CLS_OPTIONS)
    assert len(list(tmp_path.iterdir())) == 2


def test_mmpretrain_print_config(capsys):
    run_script(
        upstream_tool('mmpretrain', 'print_config'), FM_DEMO,
        '--cfg-options', *CLS_OPTIONS)
    printed = capsys.readouterr().out
    assert "type='mmtnt.TNT'" in printed
    assert f'indices={NUM_CLS}' in printed


@pytest.fixture(scope='module')
def det_run(tmp_path_factory, demo_scenes):
    """A random RetinaNet demo's predictions on the first validation
    scenes (``tools/test.py --out``)."""
    out = tmp_path_factory.mktemp('det_run')
    options = data_options(str(DET_DEMO), demo_scenes) + LOADERS + [
        f'{split}_dataloader.dataset.indices={NUM_DENSE}'
        for split in ('train', 'test')
    ]
    checkpoint = save_random_checkpoint(DET_DEMO, out / 'random.pth')
    run_script(TOOLS / 'test.py', DET_DEMO, checkpoint, '--work-dir', out,
               '--out', out / 'preds.pkl', '--cfg-options', *options)
    return out, options


def test_mmdet_analyze_results(det_run):
    """Builds the runner (and the model) from the config, scores each scene
    and draws the best and the worst half (at most ``--topk`` each)."""
    out, options = det_run
    run_script(
        upstream_tool('mmdet', 'analyze_results'), DET_DEMO,
        out / 'preds.pkl', out / 'analyze', '--topk', NUM_DENSE,
        '--cfg-options', *options)
    drawn = [
        jpg.name.split('_')[0] for kind in ('good', 'bad')
        for jpg in (out / 'analyze' / kind).glob('*.jpg')
    ]
    assert sorted(drawn) == [f'{i:06d}' for i in range(1, NUM_DENSE + 1)]


def test_mmdet_browse_dataset(det_run, tmp_path):
    _, options = det_run
    run_script(
        upstream_tool('mmdet', 'browse_dataset'), DET_DEMO, '--output-dir',
        tmp_path, '--not-show', '--cfg-options', *options)
    assert len(list(tmp_path.glob('*.jpg'))) == NUM_DENSE


def test_mmseg_confusion_matrix(tmp_path, demo_scenes):
    """mmseg's confusion matrix through seg_confusion_matrix.py, on the
    predictions ``IoUMetric`` writes for ``tools/test.py``."""
    preds = tmp_path / 'preds'
    options = data_options(str(SEG_DEMO), demo_scenes) + LOADERS + [
        f'test_dataloader.dataset.indices={NUM_DENSE}'
    ]
    checkpoint = save_random_checkpoint(SEG_DEMO, tmp_path / 'random.pth')
    run_script(TOOLS / 'test.py', SEG_DEMO, checkpoint, '--work-dir',
               tmp_path, '--cfg-options', *options,
               f'test_evaluator.output_dir={preds}',
               'test_evaluator.keep_results=True')
    script = TOOLS / 'analysis_tools' / 'seg_confusion_matrix.py'
    run_script(script, SEG_DEMO, preds, tmp_path, '--cfg-options', *options)
    assert (tmp_path / 'confusion_matrix.png').stat().st_size > 0

    # The matrix counts each labelled pixel once, on the diagonal where
    # the prediction is right (labels 1-5 on disk are classes 0-4).
    upstream = seg_confusion.load_upstream()
    dataset = upstream.DATASETS.build(
        dict(
            Config.fromfile(SEG_DEMO).test_dataloader.dataset,
            data_root=str(demo_scenes / 'ade'),
            indices=NUM_DENSE))
    matrix = upstream.calculate_confusion_matrix(
        seg_confusion.DatasetView(dataset),
        seg_confusion.read_predictions(preds, dataset.reduce_zero_label))
    labels = sorted(
        (demo_scenes / 'ade' / 'annotations' / 'validation').glob('*.png'))
    labelled = right = 0
    for label_file, pred_file in zip(labels, sorted(preds.iterdir())):
        label = np.array(Image.open(label_file)).astype(int)
        pred = np.array(Image.open(pred_file)).astype(int)
        labelled += (label > 0).sum()
        right += ((label > 0) & (label == pred)).sum()
    assert matrix.shape == (5, 5)
    assert matrix.sum() == labelled and np.trace(matrix) == right
