"""Time mmtnt's backbones against other implementations of the same
architecture, side by side in one process.

Every implementation is wrapped into an ImageNet classifier (backbone,
global average pooling where the backbone does not pool, a 1000-class linear
head) and timed on the same random batch for

- ``forward``: ``model.eval()`` under ``torch.no_grad()``;
- ``train``: ``model.train()``, forward, cross-entropy, backward and one
  AdamW step.

After warm-up runs, the implementations take turns (the order rotates every
round), so a change of machine load hits all of them alike; the table shows
the median over the rounds in milliseconds per image and, for each peer, the
median over the rounds of the ratio peer time / mmtnt time within the round
(above 1: mmtnt is faster), which cancels slow drifts of the machine's load.

Examples:
    python tools/analysis_tools/benchmark.py pcpvt-s svt-s
    python tools/analysis_tools/benchmark.py tnt-s --batch-size 4 --rounds 3
    python tools/analysis_tools/benchmark.py svt-s --profile mmtnt
    python tools/analysis_tools/benchmark.py --list

New architectures are added to :data:`BENCHMARKS`: the mmtnt backbone's
config and the peers that implement the same model (none for a model that
exists only in mmtnt, such as PyramidTNT).
"""
import argparse
import os
import statistics
import time
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


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


def build_mmtnt(backbone_cfg, in_channels):
    from mmtnt.registry import MODELS
    backbone = MODELS.build(backbone_cfg)
    if hasattr(backbone, 'init_weights'):
        backbone.init_weights()
    return PooledClassifier(backbone, in_channels)


def build_timm(name, **kwargs):
    import timm
    return timm.create_model(name, pretrained=False, **kwargs)


def build_mmpretrain(backbone_cfg, in_channels, neck=True):
    from mmpretrain.registry import MODELS
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


def build_mmseg(backbone_cfg, in_channels):
    from mmseg.registry import MODELS
    return PooledClassifier(MODELS.build(backbone_cfg), in_channels)


_PCPVT_S = dict(
    embed_dims=[64, 128, 320, 512],
    num_heads=[1, 2, 5, 8],
    mlp_ratios=[8, 8, 4, 4],
    depths=[3, 4, 6, 3],
    sr_ratios=[8, 4, 2, 1])
_SVT_S = dict(
    embed_dims=[64, 128, 256, 512],
    num_heads=[2, 4, 8, 16],
    mlp_ratios=[4, 4, 4, 4],
    depths=[2, 2, 10, 4],
    sr_ratios=[8, 4, 2, 1])

# name -> input size and a builder per implementation ('mmtnt' first).
BENCHMARKS = {
    'pcpvt-s':
    dict(
        img_size=224,
        impls=dict(
            mmtnt=partial(build_mmtnt, dict(type='mmtnt.PCPVT', arch='s'),
                          512),
            timm=partial(build_timm, 'twins_pcpvt_small'),
            mmpretrain=partial(
                build_mmpretrain,
                dict(
                    type='PCPVT',
                    arch='small',
                    qkv_bias=True,
                    norm_cfg=dict(type='LN', eps=1e-6),
                    norm_after_stage=[False, False, False, True]), 512),
            mmseg=partial(
                build_mmseg,
                dict(
                    type='PCPVT',
                    qkv_bias=True,
                    out_indices=(3, ),
                    drop_path_rate=0.,
                    **_PCPVT_S), 512))),
    'svt-s':
    dict(
        img_size=224,
        impls=dict(
            mmtnt=partial(build_mmtnt, dict(type='mmtnt.SVT', arch='s'), 512),
            timm=partial(build_timm, 'twins_svt_small'),
            mmpretrain=partial(
                build_mmpretrain,
                dict(
                    type='SVT',
                    arch='small',
                    qkv_bias=True,
                    norm_after_stage=[False, False, False, True]), 512),
            mmseg=partial(
                build_mmseg,
                dict(
                    type='SVT',
                    qkv_bias=True,
                    out_indices=(3, ),
                    drop_path_rate=0.,
                    windiow_sizes=[7, 7, 7, 7],
                    norm_after_stage=False,
                    **_SVT_S), 512))),
    'tnt-s':
    dict(
        img_size=224,
        impls=dict(
            mmtnt=partial(build_mmtnt, dict(type='mmtnt.TNT', arch='s'), 384),
            timm=partial(build_timm, 'tnt_s_patch16_224'),
            mmpretrain=partial(
                build_mmpretrain, dict(type='TNT', arch='s'), 384,
                neck=False))),
    # Exists only in mmtnt: timed alone (no ratios).
    'pyramidtnt-s':
    dict(
        img_size=256,
        impls=dict(
            mmtnt=partial(build_mmtnt,
                          dict(type='mmtnt.PyramidTNT', arch='s'), 512))),
}


def time_forward(model, images):
    with torch.no_grad():
        start = time.perf_counter()
        model(images)
        return time.perf_counter() - start


def time_train_step(model, optimizer, images, labels):
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    F.cross_entropy(model(images), labels).backward()
    optimizer.step()
    return time.perf_counter() - start


def build_candidates(bench, only=None):
    """Build each implementation; those that cannot be built are reported
    and left out."""
    models, skipped = {}, {}
    for impl, build in bench['impls'].items():
        if only and impl not in only:
            continue
        try:
            models[impl] = build()
        except (ImportError, KeyError) as error:
            skipped[impl] = f'{type(error).__name__}: {error}'
    return models, skipped


def run_benchmark(name, args):
    bench = BENCHMARKS[name]
    size = args.img_size or bench['img_size']
    torch.manual_seed(args.seed)
    models, skipped = build_candidates(bench, args.impls)
    images = torch.randn(args.batch_size, 3, size, size)
    labels = torch.randint(0, 1000, (args.batch_size, ))
    times = {mode: {impl: [] for impl in models} for mode in args.modes}
    for mode in args.modes:
        runners = {}
        for impl, model in models.items():
            if mode == 'forward':
                model.eval()
                runners[impl] = partial(time_forward, model, images)
            else:
                model.train()
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
                runners[impl] = partial(time_train_step, model, optimizer,
                                        images, labels)
        for run in runners.values():
            for _ in range(args.warmup):
                run()
        order = list(runners)
        for round_index in range(args.rounds):
            shift = round_index % len(order)
            for impl in order[shift:] + order[:shift]:
                times[mode][impl].append(runners[impl]())
        if mode == 'train':
            # Free gradients and optimizer state before the next model.
            for model in models.values():
                model.zero_grad(set_to_none=True)
    return size, times, skipped


def format_table(rows, modes):
    header = ['model', 'impl'] + [f'{m} ms/img' for m in modes] + \
        [f'{m} ratio' for m in modes]
    lines = ['| ' + ' | '.join(header) + ' |',
             '|' + '---|' * len(header)]
    for row in rows:
        lines.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(lines)


def summarize(name, size, times, skipped, args):
    rows = []
    medians = {
        mode: {
            impl: statistics.median(values) * 1000 / args.batch_size
            for impl, values in by_impl.items()
        }
        for mode, by_impl in times.items()
    }
    impls = list(next(iter(medians.values())))
    for impl in impls:
        row = [f'{name} ({size})', impl]
        row += [f'{medians[m][impl]:.1f}' for m in args.modes]
        for mode in args.modes:
            reference = times[mode].get('mmtnt')
            if impl == 'mmtnt' or reference is None:
                row.append('-')
            else:
                ratios = [
                    peer / own
                    for peer, own in zip(times[mode][impl], reference)
                ]
                row.append(f'{statistics.median(ratios):.2f} '
                           f'({min(ratios):.2f}-{max(ratios):.2f})')
        rows.append(row)
    for impl, reason in skipped.items():
        rows.append([f'{name} ({size})', impl] + ['skipped'] *
                    (2 * len(args.modes)))
        print(f'{name}: {impl} skipped ({reason})')
    return rows


def profile(name, args):
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    bench = BENCHMARKS[name]
    size = args.img_size or bench['img_size']
    model = bench['impls'][args.profile]()
    images = torch.randn(args.batch_size, 3, size, size)
    labels = torch.randint(0, 1000, (args.batch_size, ))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for mode in args.modes:
        if mode == 'forward':
            model.eval()
            step = partial(time_forward, model, images)
        else:
            model.train()
            step = partial(time_train_step, model, optimizer, images, labels)
        for _ in range(max(1, args.warmup)):
            step()
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        print(f'\n{name} {args.profile} {mode} (batch {args.batch_size}, '
              f'{size}x{size}):')
        print(prof.key_averages().table(
            sort_by='self_cpu_time_total', row_limit=args.profile_rows))


def parse_args():
    parser = argparse.ArgumentParser(
        description='Time mmtnt backbones against timm, mmpretrain and '
        'mmseg implementations of the same architecture.')
    parser.add_argument('names', nargs='*', help='benchmarks to run')
    parser.add_argument('--list', action='store_true',
                        help='list the benchmarks and exit')
    parser.add_argument('--impls', nargs='+',
                        help='time only these implementations')
    parser.add_argument('--modes', nargs='+', default=['forward', 'train'],
                        choices=['forward', 'train'])
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--img-size', type=int,
                        help='input side (default: the benchmark\'s)')
    parser.add_argument('--threads', type=int, default=2,
                        help='torch.set_num_threads (default 2)')
    parser.add_argument('--warmup', type=int, default=2,
                        help='untimed runs per implementation and mode')
    parser.add_argument('--rounds', type=int, default=5,
                        help='timed runs per implementation and mode')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--profile', metavar='IMPL',
                        help='profile one implementation with '
                        'torch.profiler instead of timing')
    parser.add_argument('--profile-rows', type=int, default=25)
    return parser.parse_args()


def main():
    args = parse_args()
    if args.list or not args.names:
        for name, bench in BENCHMARKS.items():
            print(f'{name}: {", ".join(bench["impls"])} '
                  f'({bench["img_size"]}x{bench["img_size"]})')
        return
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        raise SystemExit(f'Unknown benchmark(s) {unknown}: choose from '
                         f'{sorted(BENCHMARKS)}.')
    torch.set_num_threads(args.threads)
    if args.profile:
        for name in args.names:
            profile(name, args)
        return
    rows = []
    load = os.getloadavg()[0]
    for name in args.names:
        size, times, skipped = run_benchmark(name, args)
        rows += summarize(name, size, times, skipped, args)
    print(f'\nbatch {args.batch_size}, {args.threads} threads, median of '
          f'{args.rounds} interleaved rounds after {args.warmup} warm-up '
          'runs; ratio = peer time / mmtnt time in the same round, median '
          f'(min-max); load average {load:.1f} -> '
          f'{os.getloadavg()[0]:.1f}')
    print(format_table(rows, args.modes))


if __name__ == '__main__':
    main()
