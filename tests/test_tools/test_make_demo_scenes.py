"""mmtnt.datasets.demo_scenes (tools/dataset_converters/make_demo_scenes.py):
the dense demos' data."""
import filecmp
import os

import numpy as np
import pytest
from PIL import Image
from tool_utils import run_tool

from mmtnt.datasets.cli import demo_scenes_main as main
from mmtnt.datasets.demo_scenes import build

NUM_TRAIN = 24
NUM_VAL = 8
SIZE = 128


@pytest.fixture(scope='module')
def scenes(tmp_path_factory, fashion_mnist_source):
    """A small build of the demo scenes."""
    out = tmp_path_factory.mktemp('scenes')
    summary = build(str(out), NUM_TRAIN, NUM_VAL, seed=3,
                    src=fashion_mnist_source)
    assert summary is not None
    return out


def relative_files(root):
    """Every file under ``root``, relative to it, sorted."""
    return sorted(
        os.path.relpath(os.path.join(folder, name), root)
        for folder, _, names in os.walk(root) for name in names)


def test_same_bytes_twice_other_seed_differs(scenes, tmp_path):
    again = tmp_path / 'again'
    assert build(str(again), NUM_TRAIN, NUM_VAL, seed=3) is not None
    files = relative_files(scenes)
    assert files == relative_files(again)
    assert len(files) == 1 + 2 + 2 * (NUM_TRAIN + NUM_VAL) + NUM_TRAIN + \
        NUM_VAL  # stamp, 2 json, ADE images + maps, COCO images
    match, mismatch, errors = filecmp.cmpfiles(
        scenes, again, files, shallow=False)
    assert not mismatch and not errors
    # complete data are not built again
    assert build(str(again), NUM_TRAIN, NUM_VAL, seed=3) is None

    other = tmp_path / 'other'
    build(str(other), NUM_TRAIN, NUM_VAL, seed=4)
    assert not filecmp.cmp(
        scenes / 'coco' / 'train' / '000001.jpg',
        other / 'coco' / 'train' / '000001.jpg',
        shallow=False)


@pytest.mark.parametrize('split,count', [('train', NUM_TRAIN),
                                         ('val', NUM_VAL)])
def test_valid_coco(scenes, split, count):
    from pycocotools.coco import COCO
    ann_file = scenes / 'coco' / 'annotations' / f'instances_{split}.json'
    coco = COCO(str(ann_file))
    assert [c['name'] for c in coco.loadCats(coco.getCatIds())] == [
        'tshirt', 'trouser', 'sneaker', 'bag'
    ]
    assert len(coco.getImgIds()) == count
    per_image = []
    for image_id in coco.getImgIds():
        info = coco.loadImgs(image_id)[0]
        with Image.open(scenes / 'coco' / split / info['file_name']) as img:
            assert img.format == 'JPEG' and img.mode == 'RGB'
            assert img.size == (info['width'], info['height']) == (SIZE, SIZE)
        anns = coco.loadAnns(coco.getAnnIds(imgIds=image_id))
        per_image.append(len(anns))
        union = np.zeros((SIZE, SIZE), bool)
        for ann in anns:
            assert ann['iscrowd'] == 0
            assert ann['category_id'] in coco.getCatIds()
            x, y, w, h = ann['bbox']
            assert 0 <= x and 0 <= y and w > 0 and h > 0
            assert x + w <= SIZE and y + h <= SIZE
            assert ann['segmentation'] and all(
                len(poly) >= 6 and len(poly) % 2 == 0
                for poly in ann['segmentation'])
            mask = coco.annToMask(ann).astype(bool)
            # the polygons decode to the mask they outline ...
            assert abs(int(mask.sum()) - ann['area']) <= 0.25 * ann['area']
            rows, cols = np.nonzero(mask)
            assert abs(cols.min() - x) <= 1 and abs(rows.min() - y) <= 1
            assert abs(cols.max() + 1 - (x + w)) <= 1
            assert abs(rows.max() + 1 - (y + h)) <= 1
            # ... and visible parts do not overlap
            overlap = (union & mask).sum()
            assert overlap <= 0.05 * mask.sum()
            union |= mask
    assert min(per_image) >= 1 and max(per_image) <= 4
    assert np.mean(per_image) >= 2


def test_ade_label_maps_in_range(scenes):
    root = scenes / 'ade'
    for folder, prefix, count in (('training', 'ADE_train', NUM_TRAIN),
                                  ('validation', 'ADE_val', NUM_VAL)):
        images = sorted(os.listdir(root / 'images' / folder))
        maps = sorted(os.listdir(root / 'annotations' / folder))
        assert images == [f'{prefix}_{i:08d}.jpg' for i in range(1, count + 1)]
        assert maps == [name[:-4] + '.png' for name in images]
        seen = set()
        for name in maps:
            with Image.open(root / 'annotations' / folder / name) as png:
                assert png.mode == 'L' and png.size == (SIZE, SIZE)
                label = np.asarray(png)
            values = set(np.unique(label).tolist())
            # 0 ("other", ignored) is unused; 1 the scene; 2-5 the items
            assert values <= {1, 2, 3, 4, 5}
            assert 1 in values and len(values) >= 2
            seen |= values
        assert seen == {1, 2, 3, 4, 5}


def test_cli_and_missing_source(tmp_path, capsys):
    assert main([str(tmp_path / 'none'), '--src', str(tmp_path)]) == 1
    assert 'dataset-fashion-mnist' in capsys.readouterr().err
    assert not (tmp_path / 'none').exists()


def test_script_reports_complete_data(scenes):
    """The script, run as a user does, finds the data of its settings
    complete and says so."""
    result = run_tool('dataset_converters/make_demo_scenes.py', scenes,
                      '--num-train', NUM_TRAIN, '--num-val', NUM_VAL,
                      '--seed', 3)
    assert result.returncode == 0
    assert f'Demo scenes already complete in {scenes}' in result.stdout
