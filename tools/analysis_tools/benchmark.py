"""Time mmtnt's backbones, measure their training memory, and compare them
with other implementations of the same architecture in one process.

A benchmark is a variant name (``--list`` shows them) or a config file,
whose ``model.backbone`` is measured. Every backbone is wrapped into an
ImageNet classifier (global average pooling where the backbone does not
pool, a 1000-class linear head) and run on one random batch:

- ``forward``: ``model.eval()`` under ``torch.no_grad()``, in images/s;
- ``train``: ``model.train()``, forward, cross-entropy, backward and one
  AdamW step (``fused=True``, as in the configs), in ms per step;
- ``memory``: the memory one train step adds, its peak minus what was
  allocated before it (parameters and optimizer state, no gradients). On
  the CPU this is the peak resident memory with glibc's ``malloc`` set to
  return every freed tensor to the system (``release_freed_memory``),
  measured after all timings; on a GPU, ``torch.cuda.max_memory_allocated``.

On the CPU mmtnt's backbone runs with the CPU accelerator
(``mmtnt.accelerate_for_cpu``, as ``tools/train.py`` applies it), unless
``--no-cpu-accel``; with ``--compare`` the plain backbone runs too, as
``mmtnt-plain``. Timings on the CPU run with ``malloc`` keeping freed
memory for reuse (``mmtnt.accel.keep_freed_memory``, as ``tools/train.py``
does): with glibc's default every train step page-faults its activations
in afresh, for every implementation alike (docs/benchmarks.md gives what
that cost on the project's machine). ``--default-malloc`` measures without
it. A run that measures memory gives freed memory back throughout, its
timings included: time in a separate run.

With ``--compare``, the timm, mmpretrain and mmseg implementations of the
variant run too (those installed). After warm-up runs the implementations
take turns, the order rotating every round, so a change of machine load
hits all of them alike. The tables give medians over the rounds and, per
peer, the median of the per-round ratios, so slow drifts of the load
cancel: ``time peer/mmtnt`` above 1 means mmtnt is faster, ``memory
mmtnt/peer`` below 1 that it needs less.

With ``--amp-speedup`` each implementation runs with and without autocast
in turns, and the table gives both times and the median per-round speedup.

Each time is also given as achieved GFLOP/s (2 FLOPs per multiply-add, the
forward's multiply-adds as counted by ``get_flops.py``, attention products
included; a train step counts three forwards' worth) and as a fraction of
the machine's measured matrix-product peak for the dtype used (the best of
repeated large products with the same threads, by the BLAS or oneDNN).

Examples:
    python tools/analysis_tools/benchmark.py pcpvt-s svt-s --compare
    python tools/analysis_tools/benchmark.py tnt-s --modes memory \\
        --img-size 512 --batch-size 2 --compare [--with-cp]
    python tools/analysis_tools/benchmark.py \\
        configs/twins/twins-svt-s_8xb128_in1k.py --amp
    python tools/analysis_tools/benchmark.py tnt-s svt-s --amp-speedup
    python tools/analysis_tools/benchmark.py svt-s --profile mmtnt
    python tools/analysis_tools/benchmark.py --list
"""
import argparse
import contextlib
import os
import os.path as osp
import statistics
import sys
import time
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from mmtnt.accel import (accelerate_for_cpu, keep_freed_memory,
                         release_freed_memory)
from mmtnt.accel.linear import onednn_matmul
from mmtnt.engine import default_amp_dtype

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from get_flops import default_shape, flop_analyzer, load_config  # noqa: E402

MODES = ('forward', 'train', 'memory')


class PooledClassifier(nn.Module):
    """A backbone whose last output is pooled (if it is a map) and
    classified by a linear layer."""

    def __init__(self, backbone, in_channels, num_classes=1000):
        super().__init__()
        self.backbone = backbone
        self.fc = nn.Linear(in_channels, num_classes)

    def forward(self, x):
        feat = self.backbone(x)
        if isinstance(feat, (tuple, list)):
            feat = feat[-1]
        if feat.dim() == 4:
            feat = feat.mean(dim=(2, 3))
        return self.fc(feat)


class TensorModeClassifier(nn.Module):
    """An mmpretrain ``ImageClassifier`` called in ``'tensor'`` mode (it
    returns logits)."""

    def __init__(self, classifier):
        super().__init__()
        self.classifier = classifier

    def forward(self, x):
        return self.classifier(x, mode='tensor')


def build_mmtnt(backbone_cfg, img_size):
    """An mmtnt backbone in a :class:`PooledClassifier` (the head's width
    is read off one forward pass at ``img_size``)."""
    from mmtnt.registry import MODELS
    backbone = MODELS.build(dict(backbone_cfg))
    if hasattr(backbone, 'init_weights'):
        backbone.init_weights()
    with torch.no_grad():
        feat = backbone.eval()(torch.zeros(1, 3, *img_size))
    return PooledClassifier(backbone, feat[-1].shape[1])


def build_timm(name, img_size, sized=False):
    """A timm model; with ``sized``, its position embeddings are made for
    ``img_size``."""
    import timm
    kwargs = dict(img_size=img_size) if sized else {}
    return timm.create_model(name, pretrained=False, **kwargs)


def build_mmpretrain(backbone_cfg, in_channels, img_size, neck=True,
                     sized=False):
    from mmpretrain.registry import MODELS
    if sized:
        backbone_cfg = dict(backbone_cfg, img_size=img_size)
    classifier = MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=backbone_cfg,
            neck=dict(type='GlobalAveragePooling') if neck else None,
            head=dict(
                type='LinearClsHead',
                num_classes=1000,
                in_channels=in_channels,
                loss=dict(type='CrossEntropyLoss'))))
    # Weights stay at PyTorch's default initialization (their values do not
    # change the timing; init_weights() would log every parameter).
    return TensorModeClassifier(classifier)


def build_mmseg(backbone_cfg, in_channels, img_size):
    from mmseg.registry import MODELS
    return PooledClassifier(MODELS.build(backbone_cfg), in_channels)


_TWINS = {
    'pcpvt': dict(
        s=dict(embed_dims=[64, 128, 320, 512], depths=[3, 4, 6, 3]),
        b=dict(embed_dims=[64, 128, 320, 512], depths=[3, 4, 18, 3]),
        l=dict(embed_dims=[64, 128, 320, 512], depths=[3, 8, 27, 3])),
    'svt': dict(
        s=dict(embed_dims=[64, 128, 256, 512], depths=[2, 2, 10, 4]),
        b=dict(embed_dims=[96, 192, 384, 768], depths=[2, 2, 18, 2]),
        l=dict(embed_dims=[128, 256, 512, 1024], depths=[2, 2, 18, 2])),
}
_SIZE_NAMES = dict(s='small', b='base', l='large')
_ARCH_NAMES = dict(_SIZE_NAMES, ti='tiny', m='medium')


def _twins_variant(kind, size):
    """The mmtnt backbone and peers of Twins ``kind`` (pcpvt/svt), size
    ``size`` (s/b/l)."""
    dims = _TWINS[kind][size]['embed_dims']
    channels = dims[-1]
    if kind == 'pcpvt':
        heads, mlp_ratios = [1, 2, 5, 8], [8, 8, 4, 4]
        mmseg_extra = dict()
    else:
        heads, mlp_ratios = [d // 32 for d in dims], [4, 4, 4, 4]
        # mmseg spells the argument so.
        mmseg_extra = dict(windiow_sizes=[7] * 4, norm_after_stage=False)
    mmpretrain_cfg = dict(
        type=kind.upper(),
        arch=_SIZE_NAMES[size],
        qkv_bias=True,
        norm_after_stage=[False, False, False, True])
    if kind == 'pcpvt':
        # mmpretrain's PCPVT blocks default to eps 1e-5 (official: 1e-6).
        mmpretrain_cfg['norm_cfg'] = dict(type='LN', eps=1e-6)
    return dict(
        backbone=dict(type=f'mmtnt.{kind.upper()}', arch=size),
        img_size=224,
        peers=dict(
            timm=partial(build_timm,
                         f'twins_{kind}_{_SIZE_NAMES[size]}'),
            mmpretrain=partial(build_mmpretrain, mmpretrain_cfg, channels),
            mmseg=partial(
                build_mmseg,
                dict(
                    type=kind.upper(),
                    qkv_bias=True,
                    out_indices=(3, ),
                    drop_path_rate=0.,
                    embed_dims=dims,
                    num_heads=heads,
                    mlp_ratios=mlp_ratios,
                    depths=_TWINS[kind][size]['depths'],
                    sr_ratios=[8, 4, 2, 1],
                    **mmseg_extra), channels)))


def _tnt_variant(size):
    channels = dict(s=384, b=640)[size]
    return dict(
        backbone=dict(type='mmtnt.TNT', arch=size),
        img_size=224,
        sized=True,
        peers=dict(
            timm=partial(
                build_timm, f'tnt_{size}_patch16_224', sized=True),
            mmpretrain=partial(
                build_mmpretrain,
                dict(type='TNT', arch=size),
                channels,
                neck=False,
                sized=True)))


def _pyramid_tnt_variant(size):
    # Exists only in mmtnt: measured alone (no ratios).
    return dict(
        backbone=dict(type='mmtnt.PyramidTNT', arch=size),
        img_size=192 if size == 'ti' else 256,
        sized=True,
        peers=dict())


# name -> the mmtnt backbone, its input side and the peers' builders.
VARIANTS = {
    **{f'tnt-{s}': _tnt_variant(s)
       for s in ('s', 'b')},
    **{f'pyramidtnt-{s}': _pyramid_tnt_variant(s)
       for s in ('ti', 's', 'm', 'b')},
    **{f'{k}-{s}': _twins_variant(k, s)
       for k in ('pcpvt', 'svt') for s in ('s', 'b', 'l')},
}


class Benchmark:
    """What to build and at which size.

    Args:
        name (str): Shown in the tables.
        backbone (dict): The mmtnt backbone's config.
        img_size (tuple[int, int]): Input (H, W).
        peers (dict): Peer name -> builder taking ``img_size``.
        sized (bool): Whether the backbones take ``img_size`` (position
            terms made for it).
        with_cp (bool): Whether mmtnt's backbone recomputes its blocks in
            the backward pass (the peers do not).
    """

    def __init__(self, name, backbone, img_size, peers, sized=False,
                 with_cp=False):
        self.name = name
        self.backbone = dict(backbone)
        if sized:
            self.backbone['img_size'] = img_size
        if with_cp:
            self.backbone['with_cp'] = True
        self.img_size = img_size
        self.peers = peers

    def builders(self, compare, with_plain=False):
        """The implementations to build: mmtnt first, then (with
        ``with_plain``) mmtnt's plain backbone, then the peers."""
        impls = dict(mmtnt=partial(build_mmtnt, self.backbone))
        if compare:
            if with_plain:
                impls['mmtnt-plain'] = impls['mmtnt']
            impls.update(self.peers)
        return impls


def _matching_variant(backbone):
    """The variant whose backbone has the type and arch of ``backbone``
    (None if there is none)."""

    def full(arch):
        return _ARCH_NAMES.get(arch, arch)

    for variant in VARIANTS.values():
        ref = variant['backbone']
        if ref['type'] == backbone.get('type') and full(
                ref['arch']) == full(backbone.get('arch')):
            return variant
    return None


def resolve_benchmark(name, img_size=None, with_cp=False):
    """A :class:`Benchmark` from a variant name or a config file.

    Args:
        name (str): A key of :data:`VARIANTS`, or a config path (its
            ``model.backbone``; peers are those of the variant with the same
            type and arch, if any).
        img_size (tuple[int, int], optional): Input (H, W); by default the
            variant's published size, or the config's test size.
        with_cp (bool): Set ``with_cp=True`` in mmtnt's backbone.

    Returns:
        Benchmark: The benchmark.
    """
    if name.endswith('.py'):
        cfg = load_config(name)
        backbone = dict(cfg.model.backbone)
        variant = _matching_variant(backbone)
        img_size = img_size or tuple(default_shape(cfg)[0])
        peers = variant['peers'] if variant else {}
        sized = 'img_size' in backbone or bool(
            variant and variant.get('sized'))
        return Benchmark(
            osp.basename(name)[:-3], backbone, img_size, peers, sized,
            with_cp)
    if name not in VARIANTS:
        raise SystemExit(f'Unknown benchmark {name!r}: give a config file '
                         f'or one of {sorted(VARIANTS)}.')
    variant = VARIANTS[name]
    side = variant['img_size']
    return Benchmark(name, variant['backbone'], img_size or (side, side),
                     variant['peers'], variant.get('sized', False), with_cp)


def synchronize(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_forward(model, images, autocast):
    with torch.no_grad(), autocast():
        start = time.perf_counter()
        model(images)
        synchronize(images.device)
        return time.perf_counter() - start


def time_train_step(model, optimizer, images, labels, autocast):
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    with autocast():
        loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    synchronize(images.device)
    return time.perf_counter() - start


def _resident_bytes(key):
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith(key + ':'):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f'{key} is not in /proc/self/status.')


def peak_added_bytes(run, device):
    """Call ``run()`` and return the memory it added at its peak: on a GPU
    ``torch.cuda.max_memory_allocated`` minus what was allocated before;
    on the CPU the peak resident memory (``VmHWM``, reset through
    ``/proc/self/clear_refs``) minus the resident memory before."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        run()
        return torch.cuda.max_memory_allocated(device) - before
    before = _resident_bytes('VmRSS')
    with open('/proc/self/clear_refs', 'w') as clear_refs:
        clear_refs.write('5')  # reset the peak (VmHWM) to the current RSS
    run()
    return _resident_bytes('VmHWM') - before


def train_step_memory(model, optimizer, images, labels, autocast):
    """The bytes one train step adds at its peak (see the module doc)."""
    step = partial(time_train_step, model, optimizer, images, labels,
                   autocast)
    step()  # optimizer state exists from here on
    optimizer.zero_grad(set_to_none=True)
    return peak_added_bytes(step, images.device)


def forward_macs(model, images):
    """Multiply-adds of one forward pass (attention products included)."""
    analyzer = flop_analyzer(model.eval(), (images, ))
    with torch.no_grad():
        return analyzer.total()


def matmul_peak(dtype, device, size=2048, repeats=10):
    """The best GFLOP/s of ``size`` x ``size`` matrix products.

    On the CPU both of PyTorch's product routines count: ``torch.mm`` (the
    BLAS, MKL in the official wheels) and oneDNN's matmul, whichever is
    faster on the machine that runs it.

    Args:
        dtype (torch.dtype): The element type.
        device (torch.device): Where to multiply.
        size (int): Side of the square matrices.
        repeats (int): Products timed per routine; the fastest counts.

    Returns:
        float: GFLOP/s (2 FLOPs per multiply-add).
    """
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    products = [partial(torch.mm, a, b)]
    if device.type == 'cpu' and torch.backends.mkldnn.is_available():
        products.append(partial(onednn_matmul, a, b))
    best = float('inf')
    for product in products:
        for _ in range(repeats + 1):  # the first is a warm-up
            synchronize(device)
            start = time.perf_counter()
            product()
            synchronize(device)
            best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def build_candidates(bench, args, device):
    """Build each implementation; those that cannot be built are reported
    and left out."""
    accelerated = args.cpu_accel and device.type == 'cpu'
    models, skipped = {}, {}
    for impl, build in bench.builders(args.compare, accelerated).items():
        if args.impls and impl not in args.impls:
            continue
        try:
            models[impl] = build(img_size=bench.img_size).to(device)
        except (ImportError, KeyError) as error:
            skipped[impl] = f'{type(error).__name__}: {error}'
            continue
        if impl == 'mmtnt' and accelerated:
            accelerate_for_cpu(models[impl].backbone)
    return models, skipped


def make_autocast(args, device):
    """A context factory: autocast with the chosen dtype, or nothing."""
    if not args.amp:
        return contextlib.nullcontext
    return partial(torch.autocast, device.type, dtype=amp_dtype(args, device))


def amp_dtype(args, device, force=False):
    """The autocast dtype (float32 without ``--amp``, unless ``force``)."""
    if not (args.amp or force):
        return torch.float32
    return getattr(torch, args.amp_dtype or default_amp_dtype(device.type))


def random_batch(batch_size, img_size, device):
    """Random images of ``img_size`` (H, W) and 1000-class labels of one
    batch."""
    images = torch.randn(batch_size, 3, *img_size, device=device)
    labels = torch.randint(0, 1000, (batch_size, ), device=device)
    return images, labels


def new_optimizer(model):
    """AdamW as the configs build it: PyTorch's fused (one-kernel)
    implementation."""
    return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)


def step_runner(mode, model, images, labels, autocast, optimizer=None):
    """A callable that runs and times one forward pass (``'forward'``) or
    one train step with ``optimizer`` (``'train'``) of ``model``."""
    if mode == 'forward':
        return partial(time_forward, model.eval(), images, autocast)
    return partial(time_train_step, model.train(), optimizer, images, labels,
                   autocast)


def _interleaved(runners, args):
    """Run each runner ``args.warmup`` times, then ``args.rounds`` rounds
    in rotating order; return the times per runner."""
    for run in runners.values():
        for _ in range(args.warmup):
            run()
    times = {impl: [] for impl in runners}
    order = list(runners)
    for round_index in range(args.rounds):
        shift = round_index % len(order)
        for impl in order[shift:] + order[:shift]:
            times[impl].append(runners[impl]())
    return times


def run_benchmark(bench, args, device):
    """Measure every implementation of ``bench`` in the chosen modes.

    Returns:
        tuple[dict, dict, dict]: Per mode and implementation the values
        (seconds per run, or bytes for ``memory``); the forward MACs per
        image of the mmtnt model; the implementations left out and why.
    """
    torch.manual_seed(args.seed)
    models, skipped = build_candidates(bench, args, device)
    images, labels = random_batch(args.batch_size, bench.img_size, device)
    autocast = make_autocast(args, device)
    macs = None
    if 'mmtnt' in models and args.flops:
        macs = forward_macs(models['mmtnt'], images[:1])
    results = {}
    for mode in ('forward', 'train'):
        if mode not in args.modes:
            continue
        runners = {
            impl: step_runner(mode, model, images, labels, autocast,
                              new_optimizer(model) if mode == 'train' else
                              None)
            for impl, model in models.items()
        }
        results[mode] = _interleaved(runners, args)
        for model in models.values():
            # Free gradients before the next mode or benchmark.
            model.zero_grad(set_to_none=True)
    if 'memory' in args.modes:
        results['memory'] = {}
        for impl, model in models.items():
            optimizer = new_optimizer(model)
            results['memory'][impl] = [
                train_step_memory(model.train(), optimizer, images, labels,
                                  autocast)
            ]
            model.zero_grad(set_to_none=True)
            del optimizer
    return results, macs, skipped


def run_amp_speedup(bench, args, device):
    """Time each implementation with and without autocast, in turns.

    Returns:
        tuple[list[list[str]], dict]: Table rows (per mode the float32 and
        autocast medians and the median per-round speedup); the
        implementations left out and why.
    """
    torch.manual_seed(args.seed)
    models, skipped = build_candidates(bench, args, device)
    images, labels = random_batch(args.batch_size, bench.img_size, device)
    contexts = dict(
        fp32=contextlib.nullcontext,
        amp=partial(
            torch.autocast,
            device.type,
            dtype=amp_dtype(args, device, force=True)))
    label = f'{bench.name} ({bench.img_size[0]}x{bench.img_size[1]})'
    rows = []
    for impl, model in models.items():
        row = [label, impl]
        for mode in ('forward', 'train'):
            if mode not in args.modes:
                continue
            optimizer = new_optimizer(model) if mode == 'train' else None
            runners = {
                k: step_runner(mode, model, images, labels, c, optimizer)
                for k, c in contexts.items()
            }
            times = _interleaved(runners, args)
            model.zero_grad(set_to_none=True)
            row += [
                f'{statistics.median(times["fp32"]) * 1000:.0f} ms',
                f'{statistics.median(times["amp"]) * 1000:.0f} ms',
                _ratio_cell(times['fp32'], times['amp'], True)
            ]
        rows.append(row)
    return rows, skipped


def _ratio_cell(values, reference, peer_over_own):
    ratios = [
        peer / own if peer_over_own else own / peer
        for peer, own in zip(values, reference)
    ]
    if len(ratios) == 1:
        return f'{ratios[0]:.2f}'
    return (f'{statistics.median(ratios):.2f} '
            f'({min(ratios):.2f}-{max(ratios):.2f})')


def summarize(bench, results, macs, skipped, args, peak):
    """Table rows: one per implementation."""
    rows = []
    label = f'{bench.name} ({bench.img_size[0]}x{bench.img_size[1]})'
    impls = list(next(iter(results.values()))) if results else []
    reference = {mode: values.get('mmtnt') for mode, values in
                 results.items()}
    for impl in impls:
        row = [label, impl]
        for mode, values in results.items():
            median = statistics.median(values[impl])
            if mode == 'forward':
                row.append(f'{args.batch_size / median:.1f} img/s')
            elif mode == 'train':
                row.append(f'{median * 1000:.0f} ms')
            else:
                row.append(f'{median / 2**20:.0f} MiB')
            if mode != 'memory' and macs is not None:
                flops = 2 * macs * args.batch_size * (3 if mode == 'train'
                                                      else 1)
                row.append(f'{flops / median / 1e9:.0f} '
                           f'({flops / median / 1e9 / peak:.0%})')
            elif mode != 'memory':
                row.append('-')
            if impl == 'mmtnt' or reference[mode] is None:
                row.append('-')
            else:
                row.append(
                    _ratio_cell(values[impl], reference[mode],
                                peer_over_own=mode != 'memory'))
        rows.append(row)
    for impl, reason in skipped.items():
        print(f'{bench.name}: {impl} skipped ({reason})')
    return rows


def table_header(modes):
    header = ['model', 'impl']
    for mode in modes:
        if mode == 'forward':
            header += ['forward', 'GFLOP/s (of peak)', 'time peer/mmtnt']
        elif mode == 'train':
            header += ['train step', 'GFLOP/s (of peak)', 'time peer/mmtnt']
        else:
            header += ['train memory', 'memory mmtnt/peer']
    return header


def format_table(header, rows):
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
    return '\n'.join(lines)


def profile(bench, args, device):
    """Print torch.profiler's table of one forward / train step of the
    implementation ``args.profile``."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    builders = bench.builders(compare=True, with_plain=True)
    if args.profile not in builders:
        raise SystemExit(f'{bench.name} has no implementation '
                         f'{args.profile!r}: choose from {list(builders)}.')
    model = builders[args.profile](img_size=bench.img_size).to(device)
    if args.profile == 'mmtnt' and args.cpu_accel and device.type == 'cpu':
        accelerate_for_cpu(model.backbone)
    images, labels = random_batch(args.batch_size, bench.img_size, device)
    optimizer = new_optimizer(model)
    autocast = make_autocast(args, device)
    activities = [ProfilerActivity.CPU]
    if device.type == 'cuda':
        activities.append(ProfilerActivity.CUDA)
    for mode in args.modes:
        if mode == 'memory':
            continue
        step = step_runner(mode, model, images, labels, autocast, optimizer)
        for _ in range(max(1, args.warmup)):
            step()
        with torch_profile(activities=activities) as prof:
            step()
        print(f'\n{bench.name} {args.profile} {mode} (batch '
              f'{args.batch_size}):')
        print(prof.key_averages().table(
            sort_by='self_cpu_time_total', row_limit=args.profile_rows))


def set_malloc(args, device):
    """Set how glibc's ``malloc`` handles freed memory for the whole run:
    given back at once when memory is measured (so that the resident
    memory follows the live tensors), otherwise kept for reuse unless
    ``--default-malloc``. Records the outcome in ``args.malloc``."""
    args.malloc = 'default'
    if device.type != 'cpu':
        return
    if 'memory' in args.modes:
        if release_freed_memory():
            args.malloc = 'release'
        else:
            print('warning: could not set the C allocator (not glibc?): the '
                  'memory column counts freed but cached blocks too')
    elif args.keep_freed_memory and keep_freed_memory():
        args.malloc = 'keep'


def accel_note(args, device):
    """Whether mmtnt's backbone runs with the CPU accelerator."""
    if device.type != 'cpu':
        return 'plain mmtnt'
    if args.cpu_accel:
        return 'mmtnt with the CPU accelerator'
    return 'mmtnt without the CPU accelerator (--no-cpu-accel)'


def malloc_note(args):
    """How the C allocator handled freed memory during the measurements."""
    return {
        'keep': 'malloc keeps freed memory',
        'release': 'malloc gives freed memory back at once (memory mode)',
        'default': 'glibc\'s default malloc',
    }[args.malloc]


def print_amp_speedup(benches, args, device, load):
    rows = []
    for bench in benches:
        bench_rows, skipped = run_amp_speedup(bench, args, device)
        rows += bench_rows
        for impl, reason in skipped.items():
            print(f'{bench.name}: {impl} skipped ({reason})')
    header = ['model', 'impl']
    for mode in ('forward', 'train'):
        if mode in args.modes:
            name = 'forward' if mode == 'forward' else 'train step'
            header += [f'{name} fp32', f'{name} autocast', 'speedup']
    print(f'\n{device.type}, autocast '
          f'{amp_dtype(args, device, force=True)} against float32, batch '
          f'{args.batch_size}, {args.threads} threads, median of '
          f'{args.rounds} interleaved rounds after {args.warmup} warm-up '
          f'runs; {accel_note(args, device)}; {malloc_note(args)}; load '
          f'average {load:.1f} -> '
          f'{os.getloadavg()[0]:.1f}')
    print(format_table(header, rows))


def device_description(device):
    """The device and the library versions, in words."""
    versions = f'torch {torch.__version__}'
    if device.type == 'cuda':
        cudnn = torch.backends.cudnn.version()
        return (f'{torch.cuda.get_device_name(device)}, {versions}, CUDA '
                f'{torch.version.cuda}, cuDNN {cudnn // 10000}.'
                f'{cudnn // 100 % 100}.{cudnn % 100}')
    model = 'CPU'
    with open('/proc/cpuinfo') as cpuinfo:
        for line in cpuinfo:
            if line.startswith('model name'):
                model = line.split(':', 1)[1].strip()
                break
    return f'{model} ({os.cpu_count()} cores), {versions}'


def checked_img_size(parser, img_size):
    """``--img-size`` (one side, or H W) as (H, W); None stays None.

    Args:
        parser (argparse.ArgumentParser): Reports a bad value.
        img_size (list[int], optional): The parsed values.

    Returns:
        tuple[int, int] | None: The input size.
    """
    if img_size is None:
        return None
    if len(img_size) not in (1, 2) or min(img_size) < 1:
        parser.error('--img-size takes one positive side or H W, got '
                     f'{img_size}.')
    return tuple(img_size * (3 - len(img_size)))


def checked_device(name):
    """``torch.device(name)``; exits with one line if it names CUDA on a
    machine without a GPU."""
    device = torch.device(name)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise SystemExit(f'--device {name}: no GPU is available.')
    return device


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Time mmtnt backbones, measure their training memory, '
        'and compare them with timm, mmpretrain and mmseg.')
    parser.add_argument(
        'names', nargs='*', help='variants (see --list) or config files')
    parser.add_argument(
        '--list', action='store_true', help='list the variants and exit')
    parser.add_argument(
        '--compare',
        action='store_true',
        help='also run the timm/mmpretrain/mmseg implementations')
    parser.add_argument(
        '--impls', nargs='+', help='run only these implementations')
    parser.add_argument(
        '--modes', nargs='+', default=['forward', 'train'], choices=MODES)
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument(
        '--img-size',
        type=int,
        nargs='+',
        help='input side, or H W (default: the published size, or the '
        'config\'s test size)')
    parser.add_argument(
        '--device', default='cpu', help='cpu, cuda or cuda:N')
    parser.add_argument(
        '--amp',
        action='store_true',
        help='autocast: bfloat16 on the CPU and on GPUs that have it, as '
        'tools/train.py --amp; float16 on older GPUs')
    parser.add_argument(
        '--amp-dtype',
        choices=['float16', 'bfloat16'],
        help='the autocast dtype (with --amp or --amp-speedup)')
    parser.add_argument(
        '--amp-speedup',
        action='store_true',
        help='time every implementation with and without autocast, in '
        'turns, and print the speedup autocast gives')
    parser.add_argument(
        '--threads',
        type=int,
        default=2,
        help='torch.set_num_threads (default 2)')
    parser.add_argument(
        '--warmup',
        type=int,
        default=2,
        help='untimed runs per implementation and mode')
    parser.add_argument(
        '--rounds',
        type=int,
        default=5,
        help='timed runs per implementation and mode')
    parser.add_argument(
        '--with-cp',
        action='store_true',
        help='mmtnt\'s backbone recomputes its blocks in the backward pass '
        '(with_cp=True); the peers do not')
    parser.add_argument(
        '--no-flops',
        dest='flops',
        action='store_false',
        help='skip counting FLOPs (no GFLOP/s columns)')
    parser.add_argument(
        '--default-malloc',
        dest='keep_freed_memory',
        action='store_false',
        help='leave glibc\'s malloc giving freed memory back to the kernel '
        '(its default) instead of keeping it for reuse, as tools/train.py '
        'does')
    parser.add_argument(
        '--no-cpu-accel',
        dest='cpu_accel',
        action='store_false',
        help='run mmtnt\'s plain backbone on the CPU too, without '
        'mmtnt.accelerate_for_cpu')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument(
        '--profile',
        metavar='IMPL',
        help='profile one implementation with torch.profiler instead of '
        'timing')
    parser.add_argument('--profile-rows', type=int, default=25)
    args = parser.parse_args(argv)
    args.img_size = checked_img_size(parser, args.img_size)
    for bad in ('batch_size', 'rounds', 'threads'):
        if getattr(args, bad) < 1:
            parser.error(f'--{bad.replace("_", "-")} must be positive.')
    if args.amp_dtype and not (args.amp or args.amp_speedup):
        parser.error('--amp-dtype needs --amp or --amp-speedup.')
    if args.amp_speedup and (args.amp or 'memory' in args.modes):
        parser.error('--amp-speedup times forward and train steps with and '
                     'without autocast: leave out --amp and the memory mode.')
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.list or not args.names:
        for name, variant in VARIANTS.items():
            peers = ', '.join(variant['peers']) or 'no peers'
            print(f'{name}: {variant["img_size"]}px, {peers}')
        return
    device = checked_device(args.device)
    benches = [
        resolve_benchmark(n, args.img_size, args.with_cp) for n in args.names
    ]
    torch.set_num_threads(args.threads)
    set_malloc(args, device)
    if args.profile:
        for bench in benches:
            profile(bench, args, device)
        return
    load = os.getloadavg()[0]
    if args.amp_speedup:
        print_amp_speedup(benches, args, device, load)
        return
    dtype = amp_dtype(args, device)
    peak = matmul_peak(dtype, device)
    modes = [m for m in MODES if m in args.modes]
    rows = []
    for bench in benches:
        results, macs, skipped = run_benchmark(bench, args, device)
        rows += summarize(bench, results, macs, skipped, args, peak)
    print(f'\n{device.type}, {dtype} '
          f'{"autocast" if args.amp else "(no autocast)"}, batch '
          f'{args.batch_size}, {args.threads} threads, median of '
          f'{args.rounds} interleaved rounds after {args.warmup} warm-up '
          f'runs; {accel_note(args, device)}; {malloc_note(args)}; matmul '
          f'peak {peak:.0f} GFLOP/s; '
          f'load average {load:.1f} '
          f'-> {os.getloadavg()[0]:.1f}')
    print(format_table(table_header(modes), rows))


if __name__ == '__main__':
    main()
