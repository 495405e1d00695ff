"""The data loader's share of a train step: a config's train pipeline in
images per second of one CPU core, on JPEGs of ImageNet's size made here,
and the cores per GPU it needs at a GPU's train step (``python -m
benchmarks.data_loader CONFIG...``).

The pipeline is ``train_dataloader.dataset.pipeline``, built with
mmengine's ``Compose`` in the config's ``default_scope``, as the runner's
dataset builds it. It runs in this one process on one thread, as each of
the loader's workers does (``torch.set_num_threads(1)``,
``cv2.setNumThreads(0)``; run it with ``OMP_NUM_THREADS=1``). A round
passes every JPEG through the pipeline once, the random state seeded
alike every round, so that every round does the same work; the time is
the CPU time of this process (``--clock cpu``), which other programs on
the machine inflate far less than the wall time (``--clock wall``).

The JPEGs (:func:`write_jpegs`, cached under ``--cache-dir``) are made
from noise whose amplitude falls as 1/f, as that of natural images does,
with a few sharp-edged shapes; at the defaults they average 400x350
pixels as ImageNet's train images do, are saved at quality 96 without
chroma subsampling as most of them are, and weigh about 110 KB as their
average does (JPEG decoding time grows with the bytes to decode).

Each pipeline runs with its own loading transform (``config``) and, with
``--loaders``, with stand-ins for it:

- ``decoded``: copies of the images decoded beforehand: the pipeline as
  fast as any faster decoder could make it;
- ``draft``: every JPEG decoded at half its size by libjpeg's DCT scaling
  (OpenCV's ``IMREAD_REDUCED_COLOR_2``, faster than Pillow's draft mode):
  a bound, not a valid pipeline, since RandomResizedCrop's crops then have
  fewer pixels than its output wherever they are under twice its side.

With ``--step-ms`` (a GPU's train step at each config's per-GPU batch) the
table gives the GPU's images/s, the cores per GPU the pipeline needs for
it, and whether the config's ``num_workers`` or the GPU bounds the step.
A second table gives each transform's share of the config's pipeline, a
third times the decoders alone, on the JPEGs' bytes in memory.

Examples::

    OMP_NUM_THREADS=1 python -m benchmarks.data_loader \\
        configs/twins/twins-svt-small_8xb128_in1k.py --step-ms 52.6
    OMP_NUM_THREADS=1 python -m benchmarks.data_loader \\
        configs/tnt/tnt-s-p16_16xb64_in1k.py --loaders config decoded draft
"""
import argparse
import io
import os
import os.path as osp
import random
import statistics
import tempfile
import time
from functools import partial

import cv2
import mmcv
import numpy as np
import torch
from mmengine.dataset import Compose
from mmengine.registry import init_default_scope
from PIL import Image

from mmtnt.analysis import format_table, load_config
from .measure import interleaved_rounds, ratio_cell
from .options import add_timing_options, device_description

JPEG_SIZE = (350, 400)
JPEG_QUALITY = 96
# The fall of the amplitude spectrum; 1.3 makes the default JPEGs weigh
# about 110 KB.
SPECTRUM_EXPONENT = 1.3
SHAPES_PER_IMAGE = 6
LOADERS = ('config', 'decoded', 'draft')
CLOCKS = dict(cpu=time.process_time, wall=time.perf_counter)


def spectral_field(rng, shape, exponent):
    """Gaussian noise whose amplitude spectrum falls as 1/f**exponent.

    Args:
        rng (np.random.Generator): The random source.
        shape (tuple[int, int]): (H, W).
        exponent (float): 1 to 1.5 for natural images' textures.

    Returns:
        np.ndarray: float64 (H, W), mean 0 and standard deviation 1.

    Examples:
        >>> field = spectral_field(np.random.default_rng(0), (8, 6), 1.)
        >>> field.shape, round(float(field.std()), 6)
        ((8, 6), 1.0)
    """
    height, width = shape
    freq = np.hypot(*np.meshgrid(np.fft.fftfreq(height),
                                 np.fft.rfftfreq(width), indexing='ij'))
    freq[0, 0] = np.inf  # no constant term
    spectrum = (rng.standard_normal(freq.shape) +
                1j * rng.standard_normal(freq.shape)) / freq**exponent
    field = np.fft.irfft2(spectrum, s=shape)
    return field / field.std()


def natural_image(rng, shape, exponent=SPECTRUM_EXPONENT):
    """An RGB image with natural images' spectrum and sharp edges: a 1/f
    luminance texture, two smoother colour textures, and shapes of other
    shades over it.

    Args:
        rng (np.random.Generator): The random source.
        shape (tuple[int, int]): (H, W).
        exponent (float): The luminance spectrum's fall
            (:func:`spectral_field`); the colours fall faster.

    Returns:
        np.ndarray: uint8 (H, W, 3).

    Examples:
        >>> natural_image(np.random.default_rng(0), (12, 16)).shape
        (12, 16, 3)
    """
    luma = spectral_field(rng, shape, exponent)
    red_green, yellow_blue = (spectral_field(rng, shape, exponent + 0.3)
                              for _ in range(2))
    rgb = np.stack([
        luma + 0.35 * red_green, luma - 0.2 * red_green + 0.2 * yellow_blue,
        luma - 0.35 * yellow_blue
    ], axis=-1) * 45 + 120 + rng.uniform(-30, 30, 3)
    rows, cols = np.ogrid[:shape[0], :shape[1]]
    for _ in range(SHAPES_PER_IMAGE):
        (y, x), (ry, rx) = (rng.uniform(0, 1, 2) * shape,
                            rng.uniform(.02, .3, 2) * shape + 1)
        inside = ((rows - y) / ry)**2 + ((cols - x) / rx)**2 < 1
        rgb[inside] += rng.uniform(-60, 60, 3)
    return np.clip(rgb, 0, 255).astype(np.uint8)


def write_jpegs(folder, count, shape=JPEG_SIZE, quality=JPEG_QUALITY,
                seed=0):
    """``count`` JPEGs of :func:`natural_image`, written once into a
    sub-folder of ``folder`` named by their settings, and kept there.

    Args:
        folder (str): Where the sub-folder goes.
        count (int): JPEGs.
        shape (tuple[int, int]): Their (H, W).
        quality (int): The JPEG quality; saved without chroma subsampling.
        seed (int): Image ``i`` is drawn from the seed ``(seed, i)``.

    Returns:
        list[str]: Their paths.

    Examples:
        >>> paths = write_jpegs(tempfile.mkdtemp(), 2, (12, 16))
        >>> Image.open(paths[1]).size
        (16, 12)
    """
    height, width = shape
    subfolder = osp.join(folder, f'{height}x{width}_q{quality}_seed{seed}')
    os.makedirs(subfolder, exist_ok=True)
    paths = []
    for index in range(count):
        path = osp.join(subfolder, f'{index:05d}.JPEG')
        if not osp.isfile(path):
            image = natural_image(np.random.default_rng((seed, index)), shape)
            Image.fromarray(image).save(
                path + '.part', 'JPEG', quality=quality, subsampling=0)
            os.replace(path + '.part', path)
        paths.append(path)
    return paths


def pillow_decode(data, draft_scale=1):
    """Decode JPEG bytes with Pillow into BGR, as mmcv's images are;
    ``draft_scale`` > 1 lets libjpeg scale the DCT down by up to that
    factor (Pillow's draft mode).

    Examples:
        >>> buffer = io.BytesIO()
        >>> Image.new('RGB', (32, 16)).save(buffer, 'JPEG')
        >>> pillow_decode(buffer.getvalue(), draft_scale=2).shape
        (8, 16, 3)
    """
    image = Image.open(io.BytesIO(data))
    if draft_scale > 1:
        width, height = image.size
        image.draft('RGB', (width // draft_scale, height // draft_scale))
    return np.ascontiguousarray(np.asarray(image.convert('RGB'))[..., ::-1])


def reduced_decode(data):
    """Decode JPEG bytes with OpenCV at half their size (libjpeg's DCT
    scaling) into BGR.

    Examples:
        >>> buffer = io.BytesIO()
        >>> Image.new('RGB', (32, 16)).save(buffer, 'JPEG')
        >>> reduced_decode(buffer.getvalue()).shape
        (8, 16, 3)
    """
    return cv2.imdecode(np.frombuffer(data, np.uint8),
                        cv2.IMREAD_REDUCED_COLOR_2)


def torchvision_decode(data):
    """Decode JPEG bytes with torchvision's ``decode_jpeg``
    (libjpeg-turbo) into an RGB (3, H, W) tensor."""
    from torchvision.io import decode_jpeg
    return decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8))


def decoders():
    """The decoders timed alone: name -> a function of JPEG bytes.

    ``cv2 (mmcv)`` is what ``LoadImageFromFile`` runs; torchvision's is
    left out where torchvision cannot be imported.
    """
    found = {
        'cv2 (mmcv)': mmcv.imfrombytes,
        'pillow': pillow_decode,
        'pillow draft 1/2': partial(pillow_decode, draft_scale=2),
        'cv2 reduced 1/2': reduced_decode,
    }
    try:
        import torchvision.io  # noqa: F401
    except (ImportError, RuntimeError):
        return found
    found['torchvision decode_jpeg'] = torchvision_decode
    return found


def loading_transform(load):
    """A stand-in for the pipeline's ``LoadImageFromFile``: it sets what
    that sets, the image from ``load(path)``."""

    def transform(results):
        image = load(results['img_path'])
        results.update(img=image, img_shape=image.shape[:2],
                       ori_shape=image.shape[:2])
        return results

    return transform


def read_bytes(path):
    """The bytes of a file."""
    with open(path, 'rb') as file:
        return file.read()


def loader(name, paths):
    """The loading transform of a ``--loaders`` name other than
    ``config``, for the images at ``paths``.

    Args:
        name (str): ``decoded`` or ``draft`` (see the module's docstring).
        paths (list[str]): The JPEGs.

    Returns:
        Callable[[dict], dict]: The transform.
    """
    if name == 'draft':
        return loading_transform(
            lambda path: reduced_decode(read_bytes(path)))
    images = {path: mmcv.imread(path) for path in paths}
    return loading_transform(lambda path: images[path].copy())


def build_transforms(cfg):
    """The transforms of ``cfg``'s train pipeline, built as the runner's
    dataset builds them: mmengine's ``Compose`` in the config's default
    scope (``Config.fromfile`` has imported its ``custom_imports``).

    Returns:
        list[Callable[[dict], dict]]: In order.
    """
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    return Compose(cfg.train_dataloader.dataset.pipeline).transforms


def with_loader(transforms, name, paths):
    """``transforms`` with their first, ``LoadImageFromFile``, replaced by
    :func:`loader` ``name`` (``config`` keeps it).

    Raises:
        SystemExit: If the first transform is not ``LoadImageFromFile``.
    """
    if name == 'config':
        return transforms
    first = type(transforms[0]).__name__
    if first != 'LoadImageFromFile':
        raise SystemExit(f'--loaders {name}: the pipeline starts with '
                         f'{first}, not LoadImageFromFile.')
    return [loader(name, paths)] + transforms[1:]


def pipeline_pass(transforms, paths, seed, clock):
    """Pass every image through the transforms once, timing each.

    Python's and numpy's random states are seeded with ``seed`` first, so
    that every pass draws the same augmentations.

    Args:
        transforms (list[Callable[[dict], dict]]): The pipeline.
        paths (list[str]): The images.
        seed (int): The random seed.
        clock (Callable[[], float]): Read around every transform.

    Returns:
        list[float]: Per transform, its seconds over all the images.

    Examples:
        >>> ticks = iter(range(8))
        >>> pipeline_pass([dict, dict], ['a.JPEG', 'b.JPEG'], 0,
        ...               lambda: next(ticks))
        [2.0, 2.0]
    """
    random.seed(seed)
    np.random.seed(seed)
    seconds = [0.] * len(transforms)
    for path in paths:
        results = dict(img_path=path, gt_label=0, sample_idx=0)
        for index, transform in enumerate(transforms):
            start = clock()
            results = transform(results)
            seconds[index] += clock() - start
    return seconds


def decode_pass(decode, blobs, clock):
    """The seconds ``decode`` takes over every blob of JPEG bytes."""
    start = clock()
    for blob in blobs:
        decode(blob)
    return clock() - start


def images_per_second(images, seconds):
    """``images`` per the median of ``seconds``.

    Examples:
        >>> images_per_second(64, [0.25, 0.2, 0.5])
        256.0
    """
    return images / statistics.median(seconds)


def gpu_demand(batch_size, step_ms, core_rate, workers):
    """What a GPU's train step asks of the loader.

    Args:
        batch_size (int): Images per GPU step.
        step_ms (float): The GPU's train step.
        core_rate (float): The pipeline's images/s on one core.
        workers (int): The loader's worker processes per GPU.

    Returns:
        dict: ``gpu_rate`` (images/s the GPU consumes), ``cores`` (cores
        the pipeline needs for it), ``bound`` (``'loader'`` where
        ``workers`` cores fall short, else ``'GPU'``) and ``step_ms``
        (the step with ``workers`` cores: the GPU's, or the loader's
        batch time if longer).

    Examples:
        >>> gpu_demand(128, 64., 250., 8)
        {'gpu_rate': 2000.0, 'cores': 8.0, 'bound': 'GPU', 'step_ms': 64.0}
    """
    gpu_rate = batch_size / step_ms * 1000
    cores = gpu_rate / core_rate
    loader_ms = batch_size / (workers * core_rate) * 1000
    return dict(gpu_rate=gpu_rate, cores=cores,
                bound='loader' if cores > workers else 'GPU',
                step_ms=max(step_ms, loader_ms))


class ConfigRun:
    """One config's pipeline and what the table says of it.

    Args:
        name (str): The config file.
        cfg (Config): Its contents.
        step_ms (float, optional): A GPU's train step at its per-GPU batch.

    Attributes:
        label (str): The file name without ``.py``.
        batch_size (int): ``train_dataloader.batch_size``.
        workers (int): ``train_dataloader.num_workers``.
        transforms (list): The built pipeline.
    """

    def __init__(self, name, cfg, step_ms=None):
        self.label = osp.splitext(osp.basename(name))[0]
        self.batch_size = cfg.train_dataloader.batch_size
        self.workers = cfg.train_dataloader.get('num_workers', 0)
        self.step_ms = step_ms
        self.transforms = build_transforms(cfg)

    def row(self, loader_name, measured, reference, images):
        """The cells of this pipeline with one loader.

        Args:
            loader_name (str): The loader.
            measured (list[list[float]]): Per round, the seconds of each
                transform (:func:`pipeline_pass`).
            reference (list[list[float]]): The same with the config's
                loader.
            images (int): Images per round.

        Returns:
            dict: Cells by column key (:data:`PIPELINE_COLUMNS`).
        """
        totals = [sum(seconds) for seconds in measured]
        rate = images_per_second(images, totals)
        loading = statistics.median(s[0] / sum(s) for s in measured)
        cells = dict(config=self.label, loader=loader_name,
                     rate=f'{rate:.0f}', loading=f'{loading:.0%}')
        if loader_name != 'config':
            cells['speedup'] = ratio_cell([sum(s) for s in reference],
                                          totals, peer_over_own=True)
            return cells
        if self.step_ms is None:
            return cells
        demand = gpu_demand(self.batch_size, self.step_ms, rate,
                            self.workers)
        cells.update(
            gpu=f'{self.step_ms:g} ms x {self.batch_size}',
            gpu_rate=f'{demand["gpu_rate"]:.0f}',
            cores=f'{demand["cores"]:.1f}', workers=str(self.workers),
            bound=demand['bound'], step=f'{demand["step_ms"]:.0f} ms')
        return cells


    def breakdown(self, measured, images):
        """Each transform's time per image and share of the pipeline.

        Args:
            measured (list[list[float]]): Per round, the seconds of each
                transform with the config's loader.
            images (int): Images per round.

        Returns:
            list[list[str]]: The rows of :data:`BREAKDOWN_COLUMNS`.
        """
        rows = []
        for index, transform in enumerate(self.transforms):
            share = statistics.median(s[index] / sum(s) for s in measured)
            seconds = statistics.median(s[index] for s in measured)
            rows.append([
                self.label, type(transform).__name__,
                f'{seconds / images * 1e3:.2f}', f'{share:.0%}'
            ])
        return rows


PIPELINE_COLUMNS = [
    ('config', 'config'),
    ('loader', 'loader'),
    ('rate', 'pipeline (img/s per core)'),
    ('loading', 'loading share'),
    ('speedup', 'speed-up over config\'s loader'),
    ('gpu', 'GPU step (per-GPU batch)'),
    ('gpu_rate', 'GPU img/s'),
    ('cores', 'cores per GPU needed'),
    ('workers', 'workers per GPU'),
    ('bound', 'bound'),
    ('step', 'step with those workers'),
]
BREAKDOWN_COLUMNS = ['config', 'transform', 'ms per image', 'share']
DECODER_COLUMNS = ['decoder', 'img/s per core', 'speed-up over cv2 (mmcv)']


def measure_pipelines(runs, loaders, paths, args, clock):
    """Time every run's pipeline with every loader, in interleaved rounds.

    Returns:
        tuple[list[dict], list[list[str]]]: The rows of the pipeline table
        (:meth:`ConfigRun.row`) and of the breakdown
        (:meth:`ConfigRun.breakdown`).
    """
    runners = {(index, name): partial(
        pipeline_pass, with_loader(run.transforms, name, paths), paths,
        args.seed, clock)
               for index, run in enumerate(runs) for name in loaders}
    measured = interleaved_rounds(runners, args.warmup, args.rounds)
    images = len(paths)
    rows = [
        run.row(name, measured[index, name], measured[index, 'config'],
                images) for index, run in enumerate(runs) for name in loaders
    ]
    breakdown = [
        row for index, run in enumerate(runs)
        for row in run.breakdown(measured[index, 'config'], images)
    ]
    return rows, breakdown


def measure_decoders(paths, args, clock):
    """Time every decoder of :func:`decoders` alone on the JPEGs' bytes.

    Returns:
        list[list[str]]: The rows of :data:`DECODER_COLUMNS`.
    """
    blobs = [read_bytes(path) for path in paths]
    measured = interleaved_rounds(
        {name: partial(decode_pass, decode, blobs, clock)
         for name, decode in decoders().items()}, args.warmup, args.rounds)
    reference = measured['cv2 (mmcv)']
    return [[
        name, f'{images_per_second(len(blobs), seconds):.0f}',
        ratio_cell(reference, seconds, peer_over_own=True)
    ] for name, seconds in measured.items()]


def parse_args(argv=None):
    """The options of ``python -m benchmarks.data_loader``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: ``jpeg_size`` as (H, W).
    """
    parser = argparse.ArgumentParser(
        description='Time configs\' train pipelines on one core, on JPEGs '
        'of ImageNet\'s size, and the cores per GPU they need.')
    parser.add_argument('configs', nargs='+', help='config files')
    parser.add_argument(
        '--step-ms', type=float, nargs='+',
        help='a GPU\'s train step at each config\'s per-GPU batch, in '
        'config order (e.g. from the GPU tables of docs/benchmarks.md)')
    parser.add_argument(
        '--loaders', nargs='+', default=['config'], choices=LOADERS,
        help='the loading transforms to run each pipeline with')
    parser.add_argument('--images', type=int, default=64,
                        help='JPEGs per round')
    parser.add_argument('--jpeg-size', type=int, nargs=2, default=JPEG_SIZE,
                        metavar=('H', 'W'))
    parser.add_argument('--quality', type=int, default=JPEG_QUALITY)
    parser.add_argument(
        '--cache-dir', default=osp.join(tempfile.gettempdir(),
                                        'mmtnt_imagenet_jpegs'),
        help='where the JPEGs are written once and kept')
    parser.add_argument('--clock', choices=list(CLOCKS), default='cpu',
                        help='the CPU time of this process, or wall time')
    add_timing_options(parser, warmup=1, rounds=5)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', help='also write the output to this file')
    args = parser.parse_args(argv)
    if args.step_ms and len(args.step_ms) != len(args.configs):
        parser.error('--step-ms takes one step per config.')
    for name in ('images', 'rounds', 'quality'):
        if getattr(args, name) < 1:
            parser.error(f'--{name} must be positive.')
    if args.warmup < 0 or min(args.jpeg_size) < 1:
        parser.error('--warmup and --jpeg-size take no negative values.')
    if 'config' not in args.loaders:
        args.loaders.insert(0, 'config')
    args.jpeg_size = tuple(args.jpeg_size)
    return args


def report(args, pipeline_rows, breakdown_rows, decoder_rows):
    """The output: the machine and settings, then the three tables."""
    height, width = args.jpeg_size
    return '\n'.join([
        f'{device_description(torch.device("cpu"))}; one process, '
        f'{torch.get_num_threads()} thread; {args.clock} time, median of '
        f'{args.rounds} interleaved rounds after {args.warmup} warm-up '
        f'passes; {args.images} JPEGs of {height}x{width} at quality '
        f'{args.quality}, {args.mean_kb:.0f} KB on average', '',
        format_table(PIPELINE_COLUMNS, pipeline_rows), '',
        format_table(BREAKDOWN_COLUMNS, breakdown_rows), '',
        format_table(DECODER_COLUMNS, decoder_rows), ''
    ])


def main(argv=None):
    """Measure every config's pipeline and the decoders; print the tables.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
    args = parse_args(argv)
    torch.set_num_threads(1)
    cv2.setNumThreads(0)
    steps = args.step_ms or [None] * len(args.configs)
    runs = [
        ConfigRun(name, load_config(name, scopes=('mmpretrain', )), step)
        for name, step in zip(args.configs, steps)
    ]
    paths = write_jpegs(args.cache_dir, args.images, args.jpeg_size,
                        args.quality, args.seed)
    args.mean_kb = statistics.mean(map(osp.getsize, paths)) / 1e3
    clock = CLOCKS[args.clock]
    pipeline_rows, breakdown_rows = measure_pipelines(
        runs, args.loaders, paths, args, clock)
    text = report(args, pipeline_rows, breakdown_rows,
                  measure_decoders(paths, args, clock))
    print(text)
    if args.out:
        os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w') as out:
            out.write(text)


if __name__ == '__main__':
    main()
