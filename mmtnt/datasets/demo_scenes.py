"""Build the detection and segmentation demo datasets ("demo scenes").

Fashion-MNIST items are coloured and pasted, 2 to 4 per 128x128 scene, onto
crops of scikit-image's pictures, and written in the COCO and ADE20K
formats (docs/datasets.md); ADE20K maps hold 0 "other" (ignored), 1 the
background, 2.. the items. The same seed gives the same bytes.
"""
import gzip
import json
import os
import os.path as osp
import shutil
import tempfile

import numpy as np
from PIL import Image
from scipy import ndimage
from skimage import data as skdata
from skimage import measure, transform
from skimage.color import hsv2rgb

from .fashion_mnist import find_sources

# Fashion-MNIST label -> class name, in the datasets' class order.
ITEM_CLASSES = {0: 'tshirt', 1: 'trouser', 7: 'sneaker', 8: 'bag'}
CLASSES = tuple(ITEM_CLASSES.values())
# Pictures shipped with scikit-image; the grey ones get a random tint.
BACKGROUNDS = ('astronaut', 'chelsea', 'coffee', 'rocket',
               'immunohistochemistry', 'brick', 'grass', 'gravel', 'camera',
               'moon')
IMAGE_SIZE = 128
NUM_ITEMS = (2, 4)  # items per scene, inclusive
ITEM_SCALE = (1.0, 2.0)  # pixels per Fashion-MNIST pixel
MAX_HIDDEN = 0.35  # at most this fraction of an item may be hidden
JPEG_QUALITY = 90
STAMP = '.complete.json'


def read_idx(path):
    """An idx file (gzipped or not) as a numpy array."""
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as f:
        raw = f.read()
    ndim = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], 'big')
             for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_items(split, src=None):
    """Class index -> the (N, 28, 28) items of one split (``'train'`` or
    ``'t10k'``)."""
    images, labels = map(
        read_idx,
        find_sources(
            [f'{split}-images-idx3-ubyte', f'{split}-labels-idx1-ubyte'],
            src).values())
    return {
        index: images[labels == label]
        for index, label in enumerate(ITEM_CLASSES)
    }


def load_backgrounds():
    """The background pictures as float RGB arrays in 0..1."""
    pictures = []
    for name in BACKGROUNDS:
        picture = getattr(skdata, name)().astype(np.float32) / 255
        pictures.append(picture)
    return pictures


def random_colour(rng):
    """A saturated RGB colour in 0..1."""
    hsv = [rng.random(), rng.uniform(0.5, 1.0), rng.uniform(0.6, 1.0)]
    return hsv2rgb(np.array(hsv, np.float32)[None, None])[0, 0]


def make_background(rng, pictures):
    """A random crop of a random picture, ``IMAGE_SIZE`` square, RGB."""
    picture = pictures[rng.integers(len(pictures))]
    height, width = picture.shape[:2]
    side = int(rng.uniform(0.3, 1.0) * min(height, width))
    top = rng.integers(height - side + 1)
    left = rng.integers(width - side + 1)
    crop = picture[top:top + side, left:left + side]
    crop = transform.resize(
        crop, (IMAGE_SIZE, IMAGE_SIZE), order=1, anti_aliasing=True)
    if crop.ndim == 2:  # grey texture: tint it
        tint = rng.uniform(0.6, 1.0, 3)
        crop = crop[..., None] * (tint / tint.max())
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    return crop * rng.uniform(0.7, 1.1)


def make_item(rng, items):
    """A coloured item: class index, RGB (h, w, 3), and its mask (h, w)."""
    label = int(rng.integers(len(items)))
    pool = items[label]
    grey = pool[rng.integers(len(pool))].astype(np.float32) / 255
    scale = rng.uniform(*ITEM_SCALE)
    shape = (round(28 * scale * rng.uniform(0.9, 1.1)), round(28 * scale))
    grey = transform.resize(grey, shape, order=1, anti_aliasing=False)
    if rng.random() < 0.5:
        grey = grey[:, ::-1]
    # The item: the largest bright connected part, holes filled.
    mask = grey > 0.1
    parts, num = ndimage.label(mask)
    if num > 1:
        sizes = ndimage.sum(mask, parts, range(1, num + 1))
        mask = parts == 1 + int(np.argmax(sizes))
    mask = ndimage.binary_fill_holes(mask)
    rows, cols = np.nonzero(mask)
    box = (slice(rows.min(), rows.max() + 1),
           slice(cols.min(), cols.max() + 1))
    shade = 0.3 + 0.7 * grey[box] / max(grey.max(), 1e-6)
    rgb = shade[..., None] * random_colour(rng)
    return label, rgb, mask[box]


def place(rng, canvas_masks, mask):
    """``mask`` placed in a scene-sized mask where it leaves every item of
    ``canvas_masks`` (``[label, visible, area]``) at least ``1 -
    MAX_HIDDEN`` visible and without holes; None after 20 tries."""
    height, width = mask.shape
    for _ in range(20):
        top = int(rng.integers(IMAGE_SIZE - height + 1))
        left = int(rng.integers(IMAGE_SIZE - width + 1))
        full = np.zeros((IMAGE_SIZE, IMAGE_SIZE), bool)
        full[top:top + height, left:left + width] = mask
        for _, visible, whole in canvas_masks:
            remaining = visible & ~full
            if remaining.sum() < (1 - MAX_HIDDEN) * whole or \
                    not np.array_equal(
                        ndimage.binary_fill_holes(remaining), remaining):
                break
        else:
            return full
    return None


def make_scene(rng, pictures, items):
    """One scene: the RGB image (uint8) and its ``(label, visible_mask)``
    items, bottom to top."""
    image = make_background(rng, pictures)
    placed = []  # [label, visible mask, full area]
    for _ in range(int(rng.integers(NUM_ITEMS[0], NUM_ITEMS[1] + 1))):
        label, rgb, mask = make_item(rng, items)
        full = place(rng, placed, mask)
        if full is None:
            continue
        for entry in placed:
            entry[1] = entry[1] & ~full
        placed.append([label, full, int(full.sum())])
        # Paste with a soft edge, the colour spread into it.
        alpha = ndimage.gaussian_filter(full.astype(np.float32), 0.6)
        colour = np.zeros_like(image)
        colour[full] = rgb[mask]
        nearest = ndimage.distance_transform_edt(
            ~full, return_distances=False, return_indices=True)
        colour = colour[nearest[0], nearest[1]]
        image = image * (1 - alpha[..., None]) + colour * alpha[..., None]
    image = np.clip(image * 255 + 0.5, 0, 255).astype(np.uint8)
    return image, [(label, visible) for label, visible, _ in placed]


def polygons(mask):
    """COCO polygons outlining ``mask``, half-way between the pixels in
    and out of it."""
    out = []
    padded = np.pad(mask.astype(np.float32), 1)
    for contour in measure.find_contours(padded, 0.5):
        contour = measure.approximate_polygon(contour, tolerance=0.5)
        if len(contour) < 4:  # a closed contour repeats its first point
            continue
        xy = contour[:-1, ::-1] - 0.5  # (row, col) in padded -> (x, y)
        out.append([round(float(v), 2) for v in xy.ravel()])
    return out


def write(path, payload):
    """Write ``payload`` (bytes) to ``path``, making its folder."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(payload)


def save_image(path, array, **options):
    """Save ``array`` (uint8) at ``path`` in the format of its extension,
    making its folder; ``options`` as PIL's ``save`` takes them."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    Image.fromarray(array).save(path, **options)


def scenes(seed, task, split, count, pictures, items):
    """Yield ``count`` scenes; scene ``i`` depends only on its arguments."""
    task_id = {'coco': 0, 'ade': 1}[task]
    split_id = {'train': 0, 'val': 1}[split]
    for index in range(count):
        rng = np.random.default_rng([seed, task_id, split_id, index])
        yield make_scene(rng, pictures, items)


def build_coco(root, split, count, seed, pictures, items):
    """Write the images and ``annotations/instances_{split}.json``."""
    images, annotations = [], []
    for index, (image, objects) in enumerate(
            scenes(seed, 'coco', split, count, pictures, items)):
        image_id = index + 1
        file_name = f'{image_id:06d}.jpg'
        save_image(osp.join(root, split, file_name), image,
                   quality=JPEG_QUALITY)
        images.append(
            dict(
                id=image_id,
                file_name=file_name,
                height=IMAGE_SIZE,
                width=IMAGE_SIZE))
        for label, visible in objects:
            rows, cols = np.nonzero(visible)
            x, y = int(cols.min()), int(rows.min())
            annotations.append(
                dict(
                    id=len(annotations) + 1,
                    image_id=image_id,
                    category_id=label + 1,
                    bbox=[x, y,
                          int(cols.max()) + 1 - x,
                          int(rows.max()) + 1 - y],
                    area=int(visible.sum()),
                    segmentation=polygons(visible),
                    iscrowd=0))
    coco = dict(
        info=dict(
            description='mmtnt demo scenes: Fashion-MNIST items on '
            'scikit-image pictures',
            version='1.0'),
        licenses=[],
        images=images,
        annotations=annotations,
        categories=[
            dict(id=i + 1, name=name, supercategory='clothing')
            for i, name in enumerate(CLASSES)
        ])
    write(
        osp.join(root, 'annotations', f'instances_{split}.json'),
        json.dumps(coco, separators=(',', ':')).encode())
    return len(images), len(annotations)


def build_ade(root, split, count, seed, pictures, items):
    """Write ADE20K-style images and label maps of one split."""
    folder, prefix = {
        'train': ('training', 'ADE_train'),
        'val': ('validation', 'ADE_val')
    }[split]
    for index, (image, objects) in enumerate(
            scenes(seed, 'ade', split, count, pictures, items)):
        name = f'{prefix}_{index + 1:08d}'
        label_map = np.ones((IMAGE_SIZE, IMAGE_SIZE), np.uint8)
        for label, visible in objects:
            label_map[visible] = label + 2
        save_image(osp.join(root, 'images', folder, name + '.jpg'), image,
                   quality=JPEG_QUALITY)
        save_image(osp.join(root, 'annotations', folder, name + '.png'),
                   label_map)
    return count


def build(out_dir, num_train=300, num_val=100, seed=0, src=None):
    """Build both datasets into ``out_dir`` (``coco/`` and ``ade/``),
    moved into place when complete.

    Args:
        out_dir (str): The output folder, made if missing.
        num_train (int): Training scenes of each dataset. Defaults to 300.
        num_val (int): Validation scenes of each dataset. Defaults to 100.
        seed (int): The seed the scenes derive from. Defaults to 0.
        src (str, optional): The folder of the Fashion-MNIST idx files.
            Defaults to the Debian package's.

    Returns:
        dict | None: ``coco_train``/``coco_val`` (images, objects) and
        ``ade_train``/``ade_val`` (images); None when ``out_dir`` already
        held these settings' data.
    """
    settings = dict(
        num_train=num_train, num_val=num_val, seed=seed, version=1)
    stamp = osp.join(out_dir, STAMP)
    if osp.isfile(stamp):
        with open(stamp) as f:
            if json.load(f).get('settings') == settings:
                return None
    items = {'train': load_items('train', src), 'val': load_items('t10k', src)}
    pictures = load_backgrounds()
    os.makedirs(out_dir, exist_ok=True)
    # No half-written data under the final name.
    tmp = tempfile.mkdtemp(dir=out_dir, prefix='.tmp-')
    try:
        summary = {}
        for split, count in (('train', num_train), ('val', num_val)):
            summary[f'coco_{split}'] = build_coco(
                osp.join(tmp, 'coco'), split, count, seed, pictures,
                items[split])
            summary[f'ade_{split}'] = build_ade(
                osp.join(tmp, 'ade'), split, count, seed, pictures,
                items[split])
        for name in ('coco', 'ade'):
            dst = osp.join(out_dir, name)
            if osp.exists(dst):
                shutil.rmtree(dst)
            os.replace(osp.join(tmp, name), dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(stamp, 'w') as f:
        json.dump(dict(settings=settings, summary=summary), f, indent=2)
    return summary
