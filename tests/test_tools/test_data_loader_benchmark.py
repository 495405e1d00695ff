"""benchmarks.data_loader: its tables on a scripted clock over a real
pipeline run on tiny JPEGs, the images/s and cores-per-GPU arithmetic,
the JPEGs it makes, and bad input."""
import itertools
from pathlib import Path

import pytest
from mmengine.config import Config

from benchmarks import data_loader

CONFIG = """
default_scope = 'mmpretrain'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=16, backend='pillow'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=128, num_workers=8, dataset=dict(pipeline=train_pipeline))
"""


def tables(text):
    """The printed Markdown tables, each as a list of dicts by column."""
    found, lines = [], []
    for line in text.splitlines() + ['']:
        if line.startswith('|'):
            lines.append([cell.strip() for cell in line.strip('|').split('|')])
        elif lines:
            header, _, *rows = lines
            found.append([dict(zip(header, row)) for row in rows])
            lines = []
    return found


def test_tables_on_a_scripted_clock(monkeypatch, tmp_path, capsys):
    config = tmp_path / 'tiny_in1k.py'
    config.write_text(CONFIG)
    # Every transform and every decoder pass takes 1 ms.
    ticks = itertools.count()
    monkeypatch.setitem(data_loader.CLOCKS, 'cpu',
                        lambda: next(ticks) / 1000)
    data_loader.main([
        str(config), '--step-ms', '80', '--loaders', 'decoded', 'draft',
        '--images', '2', '--jpeg-size', '24', '32', '--rounds', '2',
        '--warmup', '0', '--cache-dir', str(tmp_path / 'jpegs')
    ])
    pipelines, breakdown, decoders = tables(capsys.readouterr().out)
    # 4 transforms of 1 ms: 250 images/s, loading 1/4. The GPU eats 128
    # images in 80 ms: 1600 images/s, 6.4 cores, fewer than the workers.
    assert pipelines[0] == {
        'config': 'tiny_in1k', 'loader': 'config',
        'pipeline (img/s per core)': '250', 'loading share': '25%',
        'speed-up over config\'s loader': '-',
        'GPU step (per-GPU batch)': '80 ms x 128', 'GPU img/s': '1600',
        'cores per GPU needed': '6.4', 'workers per GPU': '8',
        'bound': 'GPU', 'step with those workers': '80 ms'
    }
    assert [(row['loader'], row['speed-up over config\'s loader'],
             row['bound']) for row in pipelines[1:]] == [
                 ('decoded', '1.00 (1.00-1.00)', '-'),
                 ('draft', '1.00 (1.00-1.00)', '-')]
    assert [(row['transform'], row['ms per image'], row['share'])
            for row in breakdown] == [
                ('LoadImageFromFile', '1.00', '25%'),
                ('RandomResizedCrop', '1.00', '25%'),
                ('RandomFlip', '1.00', '25%'), ('PackInputs', '1.00', '25%')]
    # A pass over 2 JPEGs: 1 ms.
    assert {row['img/s per core'] for row in decoders} == {'2000'}
    assert decoders[0]['decoder'] == 'cv2 (mmcv)'


def test_arithmetic_on_known_timings(tmp_path):
    config = tmp_path / 'tiny_in1k.py'
    config.write_text(CONFIG)
    run = data_loader.ConfigRun(str(config), Config.fromfile(config), 50.)
    # Per round, the seconds of the 4 transforms over 8 images.
    measured = [[.3, .1, .1, .1], [.2, .2, .2, .2], [.5, .1, .1, .1]]
    row = run.row('config', measured, measured, 8)
    # 8 images in the median 0.8 s; loading shares 1/2, 1/4 and 5/8.
    # 128 images in 50 ms: 2560 images/s, 256 cores of 10; 8 workers make
    # 80 images/s, a batch in 1.6 s.
    assert row == dict(config='tiny_in1k', loader='config', rate='10',
                       loading='50%', gpu='50 ms x 128', gpu_rate='2560',
                       cores='256.0', workers='8', bound='loader',
                       step='1600 ms')
    faster = [[.1, .1, .1, .1], [.1, .1, .1, .1], [.2, .1, .1, .1]]
    assert run.row('decoded', faster, measured, 8)['speedup'] == (
        '1.60 (1.50-2.00)')
    assert run.breakdown(measured, 8)[:2] == [
        ['tiny_in1k', 'LoadImageFromFile', '37.50', '50%'],
        ['tiny_in1k', 'RandomResizedCrop', '12.50', '17%']]
    assert data_loader.images_per_second(3, [1., 0.5, 0.1]) == 6.


def test_jpegs_are_made_once_and_alike(tmp_path):
    first = data_loader.write_jpegs(str(tmp_path / 'a'), 2, (24, 32))
    second = data_loader.write_jpegs(str(tmp_path / 'b'), 2, (24, 32))
    assert [open(a, 'rb').read() for a in first] == [
        open(b, 'rb').read() for b in second]
    folder = Path(first[0]).parent
    mtime = folder.stat().st_mtime_ns
    assert data_loader.write_jpegs(str(tmp_path / 'a'), 2,
                                   (24, 32)) == first
    assert folder.stat().st_mtime_ns == mtime


def test_one_step_per_config(capsys):
    with pytest.raises(SystemExit):
        data_loader.parse_args(['a.py', 'b.py', '--step-ms', '50'])
    assert 'one step per config' in capsys.readouterr().err
