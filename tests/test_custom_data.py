"""Brief runs of the custom-data recipes (configs/custom_data/,
docs/custom_data.md) through ``tools/train.py``.

A few demo scenes (:mod:`mmtnt.datasets.demo_scenes`) are
built into a temporary folder and rearranged into the layouts the recipes
document: class sub-folders of item crops, a list file of grayscale crops,
COCO files whose categories are renamed to a recipe's classes (plus one
category it does not list), and image and label-map folders with the
recipe's suffixes. Each recipe then trains two iterations with its backbone
shrunk to a tiny arch (a config that inherits the recipe) and
``--cfg-options`` for the data, the image sizes and the run length, and
validates once. Its checkpoint must hold heads sized for the custom classes
and the classes in its metadata.

The folder recipe starts, as it is shipped, from a converted checkpoint:
a timm TNT with random weights and a head of 4 more classes, converted with
``tools/model_converters/tnt2mmtnt.py`` and loaded through ``load_from``.
Its frozen part must arrive unchanged and the rest must train; the source
head must be skipped (mmengine's size-mismatch warning) and the new one
train from its own initialisation.
"""
import json
import os
import os.path as osp
import re
import shutil

import numpy as np
import pytest
import torch
from demo_runs import ROOT, describe, run_tool, train_tool
from mmengine.config import Config
from PIL import Image
from tiny_backbones import PYRAMID_TNT_TINY, SVT_TINY, TNT_TINY, TWINS_TINY

from mmtnt.datasets import demo_scenes

CONFIG_DIR = osp.join(ROOT, 'configs', 'custom_data')
FOLDER = 'tnt-s-p16_1xb32-50e_custom-folder.py'
ANNFILE = 'tnt-s-p16_1xb32-50e_custom-annfile.py'
RETINANET = 'retinanet_twins-pcpvt-s_fpn_1xb4-24e_custom-coco.py'
MASK_RCNN = 'mask-rcnn_pyramid-tnt-s_fpn_1xb4-24e_custom-coco.py'
UPERNET = 'upernet_twins-svt-s_1xb4-8k_custom-seg-512x512.py'

# The demo scenes' item classes (mmtnt.datasets.demo_scenes.CLASSES); the
# recipes' classes take their places in this order.
DEMO_CLASSES = ('tshirt', 'trouser', 'sneaker', 'bag')
CROP = 32  # classification images and crops
DENSE_SCALE = (128, 128)  # the scenes' size
SEG_CROP = (64, 64)

# What a tiny run changes in every recipe: no worker processes, a log line
# per iteration.
COMMON_OPTIONS = [
    'train_dataloader.num_workers=0',
    'train_dataloader.persistent_workers=False',
    'val_dataloader.num_workers=0',
    'val_dataloader.persistent_workers=False',
    'default_hooks.logger.interval=1',
    'randomness.seed=0',
]


def recipe_cfg(name):
    return Config.fromfile(
        osp.join(CONFIG_DIR, name), format_python_code=False)


def write_tiny_config(path, recipe, model):
    """A config that inherits ``recipe`` with ``model`` merged in (tiny
    archs are dicts, which ``--cfg-options`` cannot give)."""
    path.write_text(f"_base_ = '{osp.join(CONFIG_DIR, recipe)}'\n"
                    f'model = {model!r}\n')
    return str(path)


def train(config, work_dir, options):
    """Run tools/train.py; return the last checkpoint and the output."""
    result, path, seconds = train_tool(
        config, work_dir, [*COMMON_OPTIONS, *options], timeout=300)
    print(f'{osp.basename(work_dir.parent)}: {seconds:.1f} s')
    checkpoint = torch.load(path, map_location='cpu', weights_only=False)
    return checkpoint, result.stdout + result.stderr


def logged_metric(output, name):
    """The value of ``name`` in the last validation line of the log."""
    found = re.findall(r'(?:Epoch|Iter)\(val\).*?' + re.escape(name) +
                       r': (-?[0-9.]+)', output)
    return float(found[-1]) if found else None


def assert_heads(checkpoint, expected):
    """The head weights have the expected number of output rows."""
    state = checkpoint['state_dict']
    for key, rows in expected.items():
        assert state[key].shape[0] == rows, (key, tuple(state[key].shape))


# ---------------------------------------------------------------------------
# the data, in the recipes' layouts
# ---------------------------------------------------------------------------
@pytest.fixture(scope='module')
def scenes(tmp_path_factory):
    assert tuple(demo_scenes.CLASSES) == DEMO_CLASSES
    out = tmp_path_factory.mktemp('scenes')
    try:
        demo_scenes.build(str(out), 12, 4)
    except FileNotFoundError as err:
        pytest.skip(f'The demo scenes cannot be built: {err}')
    return out


def coco_split(scenes, split):
    with open(scenes / 'coco' / 'annotations' / f'instances_{split}.json') \
            as f:
        return json.load(f)


def item_crops(scenes, split):
    """(demo class index, 32x32 RGB crop) of every item of a split."""
    coco = coco_split(scenes, split)
    files = {image['id']: image['file_name'] for image in coco['images']}
    for ann in coco['annotations']:
        image = Image.open(scenes / 'coco' / split / files[ann['image_id']])
        x, y, w, h = ann['bbox']
        crop = image.convert('RGB').crop((x, y, x + w, y + h))
        yield ann['category_id'] - 1, crop.resize((CROP, CROP))


def pick_crops(scenes, split, num_classes, per_class):
    """``per_class`` crops of each of the first ``num_classes`` classes."""
    picked = {label: [] for label in range(num_classes)}
    for label, crop in item_crops(scenes, split):
        if label < num_classes and len(picked[label]) < per_class:
            picked[label].append(crop)
    assert all(len(c) == per_class for c in picked.values()), (
        f'too few items in the {split} scenes: '
        f'{ {k: len(v) for k, v in picked.items()} }')
    return picked


def make_class_folders(scenes, root, num_classes):
    """train/<class>/*.jpg and val/<class>/*.jpg, named by demo class."""
    for split, per_class in (('train', 2), ('val', 1)):
        picked = pick_crops(scenes, split, num_classes, per_class)
        for label, crops in picked.items():
            folder = root / split / DEMO_CLASSES[label]
            folder.mkdir(parents=True)
            for i, crop in enumerate(crops):
                crop.save(folder / f'{i}.jpg')
    return tuple(sorted(DEMO_CLASSES[:num_classes]))


def make_gray_list(scenes, root, num_classes):
    """Grayscale PNGs under images/ with meta/{train,val}.txt lists."""
    (root / 'meta').mkdir(parents=True)
    for split, per_class in (('train', 2), ('val', 1)):
        picked = pick_crops(scenes, split, num_classes, per_class)
        lines = []
        for label, crops in picked.items():
            for i, crop in enumerate(crops):
                name = f'{split}/item {label}-{i}.png'  # a space in a name
                (root / 'images' / split).mkdir(parents=True, exist_ok=True)
                crop.convert('L').save(root / 'images' / name)
                lines.append(f'{name} {label}\n')
        (root / 'meta' / f'{split}.txt').write_text(''.join(lines))


def make_coco(scenes, root, classes, num_images):
    """The first scenes with the demo categories renamed to ``classes``;
    the demo classes beyond them get names the recipe does not list."""
    (root / 'annotations').mkdir(parents=True)
    for split, count in num_images.items():
        coco = coco_split(scenes, split)
        coco['images'] = coco['images'][:count]
        kept = {image['id'] for image in coco['images']}
        coco['annotations'] = [
            a for a in coco['annotations'] if a['image_id'] in kept
        ]
        for category in coco['categories']:
            index = category['id'] - 1
            category['name'] = classes[index] if index < len(
                classes) else f'unlisted_{index}'
        (root / split).mkdir()
        for image in coco['images']:
            shutil.copy(scenes / 'coco' / split / image['file_name'],
                        root / split)
        with open(root / 'annotations' / f'{split}.json', 'w') as f:
            json.dump(coco, f)


def make_seg_folders(scenes, root, num_classes, num_images, seg_map_suffix):
    """images/<split>/*.jpg and labels/<split>/*<seg_map_suffix>: the
    scene is class 0, the first demo items 1.., the others 255."""
    # ADE label maps: 0 unlabelled, 1 scene, 2.. items
    lookup = np.full(256, 255, np.uint8)
    lookup[1:num_classes + 1] = np.arange(num_classes)
    for split, folder in (('train', 'training'), ('val', 'validation')):
        images = sorted((scenes / 'ade' / 'images' / folder).glob('*.jpg'))
        (root / 'images' / split).mkdir(parents=True)
        (root / 'labels' / split).mkdir(parents=True)
        for image in images[:num_images[split]]:
            shutil.copy(image, root / 'images' / split / image.name)
            ade = np.array(
                Image.open(scenes / 'ade' / 'annotations' / folder /
                           (image.stem + '.png')))
            Image.fromarray(lookup[ade]).save(root / 'labels' / split /
                                              (image.stem + seg_map_suffix))


# ---------------------------------------------------------------------------
# classification
# ---------------------------------------------------------------------------
def cls_options(root):
    return [
        f'train_dataloader.dataset.data_root={root}',
        f'val_dataloader.dataset.data_root={root}',
        'train_dataloader.batch_size=3', 'val_dataloader.batch_size=3',
        # RandomResizedCrop, ResizeEdge, CenterCrop
        f'train_dataloader.dataset.pipeline.1.scale={CROP}',
        f'val_dataloader.dataset.pipeline.1.scale={CROP + CROP // 8}',
        f'val_dataloader.dataset.pipeline.2.crop_size={CROP}',
        'train_cfg.max_epochs=1'
    ]


TINY_TNT = dict(
    backbone=dict(arch=dict(TNT_TINY, _delete_=True), img_size=CROP),
    head=dict(in_channels=TNT_TINY['embed_dims_outer']))


def converted_timm_tnt(tmp_path, num_classes):
    """A timm TNT of the tiny arch with random weights (std 1) and
    ``num_classes`` classes, converted by tnt2mmtnt.py."""
    timm = pytest.importorskip('timm')
    source = timm.models.tnt.TNT(
        img_size=CROP,
        patch_size=16,
        embed_dim=TNT_TINY['embed_dims_outer'],
        inner_dim=TNT_TINY['embed_dims_inner'],
        depth=TNT_TINY['num_layers'],
        num_heads_outer=TNT_TINY['num_heads_outer'],
        num_heads_inner=TNT_TINY['num_heads_inner'],
        num_classes=num_classes)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in source.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
    src, dst = tmp_path / 'timm_tnt.pth', tmp_path / 'tnt_converted.pth'
    torch.save(source.state_dict(), src)
    result, _ = run_tool(
        ['tools/model_converters/tnt2mmtnt.py',
         str(src), str(dst)], timeout=120)
    assert result.returncode == 0, describe(result)
    return torch.load(dst, map_location='cpu')['state_dict']


@pytest.mark.slow
def test_folder_recipe_fine_tunes_a_converted_checkpoint(scenes, tmp_path):
    num_classes = recipe_cfg(FOLDER).num_classes
    source_classes = num_classes + 4
    classes = make_class_folders(scenes, tmp_path / 'cls', num_classes)
    converted = converted_timm_tnt(tmp_path, source_classes)
    assert converted['head.fc.weight'].shape[0] == source_classes

    config = write_tiny_config(tmp_path / 'tiny.py', FOLDER, TINY_TNT)
    checkpoint, output = train(
        config, tmp_path / 'work',
        cls_options(tmp_path / 'cls') + [
            f'load_from={tmp_path / "tnt_converted.pth"}',
            # the embeddings and the first of the two blocks
            'model.backbone.frozen_stages=1',
            'optim_wrapper.optimizer.lr=1e-3',
        ])
    assert checkpoint['meta']['dataset_meta']['classes'] == classes
    assert logged_metric(output, 'accuracy/top1') is not None, output[-3000:]
    state = checkpoint['state_dict']
    assert_heads(checkpoint, {'head.fc.weight': num_classes})

    # The source head did not fit: mmengine warned and skipped it, and the
    # new head trained from its own initialisation (std 0.02), far from the
    # source's weights (std 1).
    assert 'size mismatch for head.fc.weight' in output
    assert converted['head.fc.weight'].std() > 0.5
    assert state['head.fc.weight'].std() < 0.1
    # The backbone loaded: its frozen part is the converted weights exactly,
    # the block after it trained away from them.
    frozen = [k for k in converted if k.startswith(
        ('backbone.word_embed.', 'backbone.sentence_proj.',
         'backbone.blocks.0.', 'backbone.cls_token', 'backbone.word_pos',
         'backbone.sentence_pos'))]
    assert len(frozen) > 10
    for key in frozen:
        assert torch.equal(state[key], converted[key]), key
    trained = [k for k in converted if k.startswith('backbone.blocks.1.')]
    assert trained and all(k in state for k in trained)
    assert not any(torch.equal(state[k], converted[k]) for k in trained)
    for key in trained:  # trained from the converted values, not from init
        assert (state[key] - converted[key]).abs().max() < 0.05, key


@pytest.mark.slow
def test_annfile_recipe_trains_on_grayscale_lists(scenes, tmp_path):
    cfg = recipe_cfg(ANNFILE)
    classes = tuple(cfg.classes)
    make_gray_list(scenes, tmp_path / 'cls_list', len(classes))
    # The images on disk have one channel; the recipe's pipeline makes 3
    # equal ones, as the 3-channel model needs.
    sample = next((tmp_path / 'cls_list' / 'images' / 'train').iterdir())
    assert Image.open(sample).mode == 'L'
    from mmengine.registry import init_default_scope
    init_default_scope('mmpretrain')
    from mmpretrain.registry import TRANSFORMS
    loaded = TRANSFORMS.build(cfg.train_pipeline[0])(
        dict(img_path=str(sample)))['img']
    assert loaded.shape == (CROP, CROP, 3)
    assert (loaded == loaded[..., :1]).all()

    config = write_tiny_config(tmp_path / 'tiny.py', ANNFILE, TINY_TNT)
    checkpoint, output = train(
        config, tmp_path / 'work',
        cls_options(tmp_path / 'cls_list') + ['load_from=None'])
    assert checkpoint['meta']['dataset_meta']['classes'] == classes
    assert logged_metric(output, 'accuracy/top1') is not None, output[-3000:]
    assert_heads(checkpoint, {'head.fc.weight': len(classes)})


# ---------------------------------------------------------------------------
# detection and instance segmentation
# ---------------------------------------------------------------------------
def det_options(root):
    return [
        f'train_dataloader.dataset.data_root={root}/',
        f'val_dataloader.dataset.data_root={root}/',
        f'val_evaluator.ann_file={root}/annotations/val.json',
        'train_dataloader.batch_size=2',
        # the Resize of each pipeline
        f'train_dataloader.dataset.pipeline.2.scale={DENSE_SCALE}',
        f'val_dataloader.dataset.pipeline.1.scale={DENSE_SCALE}',
        'train_cfg.max_epochs=1', 'train_cfg.val_interval=1',
        'default_hooks.checkpoint.interval=1'
    ]


def check_det_run(checkpoint, output, classes, heads):
    assert checkpoint['meta']['dataset_meta']['classes'] == classes
    # validation ran: COCO metrics, or CocoMetric's note that the untrained
    # model kept no box above the score threshold
    assert (logged_metric(output, 'coco/bbox_mAP') is not None or
            'results of the whole dataset is empty' in output), output[-3000:]
    assert_heads(checkpoint, heads)


@pytest.mark.slow
@pytest.mark.parametrize('recipe', [RETINANET, MASK_RCNN])
def test_coco_recipe_trains_on_renamed_classes(recipe, scenes, tmp_path):
    classes = tuple(recipe_cfg(recipe).classes)
    n = len(classes)
    make_coco(scenes, tmp_path / 'coco', classes, dict(train=4, val=2))
    if recipe == RETINANET:
        channels = TWINS_TINY['embed_dims']
        model = dict(
            backbone=dict(arch=dict(TWINS_TINY, _delete_=True), init_cfg=None),
            neck=dict(in_channels=channels, out_channels=16),
            bbox_head=dict(in_channels=16, feat_channels=16, stacked_convs=1),
            test_cfg=dict(nms_pre=100, max_per_img=20))
        # 9 anchors a position (3 scales x 3 ratios), a sigmoid per class
        heads = {'bbox_head.retina_cls.weight': 9 * n}
    else:
        channels = PYRAMID_TNT_TINY['outer_dims']
        model = dict(
            backbone=dict(
                arch=dict(PYRAMID_TNT_TINY, _delete_=True),
                img_size=DENSE_SCALE[0],
                init_cfg=None),
            neck=dict(in_channels=channels, out_channels=16),
            rpn_head=dict(in_channels=16, feat_channels=16),
            roi_head=dict(
                bbox_roi_extractor=dict(out_channels=16),
                bbox_head=dict(in_channels=16, fc_out_channels=32),
                mask_roi_extractor=dict(out_channels=16),
                mask_head=dict(
                    num_convs=1, in_channels=16, conv_out_channels=16)),
            train_cfg=dict(
                rpn=dict(sampler=dict(num=64)),
                rpn_proposal=dict(nms_pre=200, max_per_img=100),
                rcnn=dict(sampler=dict(num=64))),
            test_cfg=dict(
                rpn=dict(nms_pre=200, max_per_img=50),
                rcnn=dict(max_per_img=20)))
        # background + classes scores, class-wise boxes and masks
        heads = {
            'roi_head.bbox_head.fc_cls.weight': n + 1,
            'roi_head.bbox_head.fc_reg.weight': 4 * n,
            'roi_head.mask_head.conv_logits.weight': n,
        }
    config = write_tiny_config(tmp_path / 'tiny.py', recipe, model)
    checkpoint, output = train(config, tmp_path / 'work',
                               det_options(tmp_path / 'coco'))
    check_det_run(checkpoint, output, classes, heads)


# ---------------------------------------------------------------------------
# semantic segmentation
# ---------------------------------------------------------------------------
@pytest.mark.slow
def test_seg_recipe_trains_on_label_folders(scenes, tmp_path):
    cfg = recipe_cfg(UPERNET)
    classes = tuple(cfg.classes)
    suffix = cfg.train_dataloader.dataset.seg_map_suffix
    assert suffix != '.png'  # the names differ by more than the extension
    root = tmp_path / 'seg'
    # the scene and len(classes) - 1 demo items; the other items ignored
    make_seg_folders(scenes, root, len(classes), dict(train=4, val=2),
                     suffix)
    model = dict(
        data_preprocessor=dict(size=SEG_CROP),
        backbone=dict(arch=dict(SVT_TINY, _delete_=True), init_cfg=None),
        decode_head=dict(in_channels=SVT_TINY['embed_dims'], channels=16),
        auxiliary_head=dict(
            in_channels=SVT_TINY['embed_dims'][2], channels=16))
    config = write_tiny_config(tmp_path / 'tiny.py', UPERNET, model)
    checkpoint, output = train(config, tmp_path / 'work', [
        f'train_dataloader.dataset.data_root={root}',
        f'val_dataloader.dataset.data_root={root}',
        'train_dataloader.batch_size=2',
        # RandomResize, RandomCrop; Resize
        f'train_dataloader.dataset.pipeline.2.scale={DENSE_SCALE}',
        f'train_dataloader.dataset.pipeline.3.crop_size={SEG_CROP}',
        f'val_dataloader.dataset.pipeline.1.scale={DENSE_SCALE}',
        'train_cfg.max_iters=2', 'train_cfg.val_interval=2',
        'default_hooks.checkpoint.interval=2'
    ])
    assert checkpoint['meta']['dataset_meta']['classes'] == classes
    assert logged_metric(output, 'mIoU') is not None, output[-3000:]
    assert_heads(
        checkpoint, {
            'decode_head.conv_seg.weight': len(classes),
            'auxiliary_head.conv_seg.weight': len(classes),
        })


# ---------------------------------------------------------------------------
# the page shows the configs as they are
# ---------------------------------------------------------------------------
def test_doc_shows_every_recipe_in_full():
    with open(osp.join(ROOT, 'docs', 'custom_data.md')) as f:
        doc = f.read()
    recipes = [FOLDER, ANNFILE, RETINANET, MASK_RCNN, UPERNET]
    assert sorted(recipes) == sorted(
        p for p in os.listdir(CONFIG_DIR) if p.endswith('.py'))
    for name in recipes:
        with open(osp.join(CONFIG_DIR, name)) as f:
            text = f.read()
        assert f'```python\n# configs/custom_data/{name}\n{text}```' in doc, (
            f'docs/custom_data.md does not show {name} as it is')
    for path in set(re.findall(r'configs/custom_data/[\w.-]+\.py', doc)):
        assert osp.isfile(osp.join(ROOT, path)), path
