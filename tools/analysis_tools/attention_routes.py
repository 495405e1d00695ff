"""Time the two attention routes of mmtnt's plain model on the attention
shapes of real models, to check the route rule of
``mmtnt.models.layers.attention`` (``takes_explicit_route``).

The shapes are recorded from one forward pass of each variant at its
published size and the given batch: every distinct (queries, keys, values,
mask) of its attentions. Each is then timed, forward plus backward, in the
chosen 16-bit dtype, by:

- ``explicit``: ``explicit_attention`` (two products, a float32 softmax);
- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` with
  PyTorch's choice of kernel;
- ``sdpa-no-flash``: the same with FlashAttention ruled out (cuDNN,
  memory-efficient and math kernels allowed; on a GPU only).

A route that fails on a shape (a kernel refusing it) is printed and shown
as ``nan``.

``--sweep-keys`` adds self-attention over windows of those many keys at
``--sweep-head-dims`` (whether few keys favour the explicit route). The
table gives medians and the route the rule picks.

Examples:
    python tools/analysis_tools/attention_routes.py tnt-s svt-s --device cuda
    python tools/analysis_tools/attention_routes.py --device cuda \\
        --sweep-keys 16 25 49 64 100 --sweep-head-dims 32 64
    python tools/analysis_tools/attention_routes.py svt-s --device cpu \\
        --batch-size 1 --img-size 64 --rounds 2
"""
import argparse
import os.path as osp
import statistics
import sys
import time
from unittest import mock

import torch
import torch.nn.functional as F

from mmtnt.models.layers import attention as attention_module
from mmtnt.models.layers.attention import (explicit_attention,
                                           takes_explicit_route)

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from benchmark import (build_mmtnt, checked_device,  # noqa: E402
                       checked_img_size, device_description, format_table,
                       resolve_benchmark, synchronize)

DTYPES = dict(bfloat16=torch.bfloat16, float16=torch.float16)


def recorded_shapes(name, batch_size, img_size, device):
    """The distinct attention inputs of one forward pass of variant
    ``name``: a list of (query shape, key shape, value shape, mask), the
    mask a tensor or None."""
    bench = resolve_benchmark(name, img_size)
    model = build_mmtnt(bench.backbone, bench.img_size).to(device).eval()
    seen = {}
    original = attention_module.scaled_dot_product_attention

    def record(query, key, value, attn_mask=None, dropout_p=0.):
        mask_kind = None if attn_mask is None else (
            tuple(attn_mask.shape), attn_mask.dtype)
        signature = (tuple(query.shape), tuple(key.shape),
                     tuple(value.shape), mask_kind)
        seen.setdefault(signature, attn_mask)
        return original(query, key, value, attn_mask, dropout_p)

    images = torch.randn(batch_size, 3, *bench.img_size, device=device)
    with torch.no_grad(), mock.patch.object(
            attention_module, 'scaled_dot_product_attention', record):
        model(images)
    return [(q, k, v, mask) for (q, k, v, _), mask in seen.items()]


def sweep_shapes(num_keys, head_dims, num_windows, num_heads):
    """Self-attention over windows of each of ``num_keys`` keys."""
    return [((num_windows, num_heads, n, d), ) * 3 + (None, )
            for d in head_dims for n in num_keys]


def route_runners(device):
    """Route name -> attention function, those this device has."""
    runners = dict(
        explicit=explicit_attention, sdpa=F.scaled_dot_product_attention)
    if device.type == 'cuda':
        from torch.nn.attention import SDPBackend, sdpa_kernel
        no_flash = [
            SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
            SDPBackend.MATH
        ]

        def sdpa_no_flash(*args, **kwargs):
            with sdpa_kernel(no_flash):
                return F.scaled_dot_product_attention(*args, **kwargs)

        runners['sdpa-no-flash'] = sdpa_no_flash
    return runners


def time_route(route, shapes, mask, dtype, device, args):
    """Median seconds of forward plus backward of ``route``."""
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(s, device=device, generator=gen).to(dtype)
               .requires_grad_() for s in shapes)
    if mask is not None and mask.is_floating_point():
        mask = mask.to(device=device, dtype=dtype)
    grad = torch.randn(q.shape[:-1] + v.shape[-1:], device=device,
                       generator=gen).to(dtype)

    def step():
        synchronize(device)
        start = time.perf_counter()
        route(q, k, v, attn_mask=mask).backward(grad)
        synchronize(device)
        return time.perf_counter() - start

    for _ in range(args.warmup):
        step()
    return statistics.median(step() for _ in range(args.rounds))


def describe(shapes, mask):
    q, k, _ = shapes
    kind = '-' if mask is None else (
        'bias' if mask.is_floating_point() else 'bool')
    return [
        'x'.join(map(str, q)),
        str(k[-2]),
        str(q[-1]),
        kind,
    ]


def rows_for(source, cases, dtype, device, args):
    runners = route_runners(device)
    rows = []
    for *shapes, mask in cases:
        times = {}
        for name, run in runners.items():
            try:
                times[name] = time_route(run, shapes, mask, dtype, device,
                                         args)
            except RuntimeError as error:  # a kernel that refuses the shape
                print(f'{source} {shapes[0]} {name}: {error}'.splitlines()[0])
                times[name] = float('nan')
        example = [torch.empty(s, dtype=dtype, device=device) for s in shapes]
        rule = 'explicit' if takes_explicit_route(*example) else 'sdpa'
        # A failed route (nan) counts as the slower.
        faster = min(('explicit', 'sdpa'),
                     key=lambda r: (times[r] != times[r], times[r]))
        rows.append([source] + describe(shapes, mask) + [
            f'{t * 1000:.3f}' for t in times.values()
        ] + [f'{times["sdpa"] / times["explicit"]:.2f}', rule,
             'yes' if rule == faster else 'no'])
    return rows, list(runners)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Time the explicit and fused attention routes on the '
        'attention shapes of real models.')
    parser.add_argument('names', nargs='*', help='variants of benchmark.py')
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--dtype', default='bfloat16', choices=list(DTYPES))
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--img-size', type=int, nargs='+')
    parser.add_argument('--sweep-keys', type=int, nargs='*', default=[])
    parser.add_argument(
        '--sweep-head-dims', type=int, nargs='+', default=[32, 64])
    parser.add_argument(
        '--sweep-windows',
        type=int,
        default=4096,
        help='windows (batch x windows) of the key sweep')
    parser.add_argument('--sweep-heads', type=int, default=2)
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--out', help='also write the markdown here')
    args = parser.parse_args(argv)
    args.img_size = checked_img_size(parser, args.img_size)
    if not args.names and not args.sweep_keys:
        parser.error('give variants, --sweep-keys, or both.')
    return args


def main(argv=None):
    args = parse_args(argv)
    device = checked_device(args.device)
    dtype = DTYPES[args.dtype]
    rows, routes = [], []
    for name in args.names:
        cases = recorded_shapes(name, args.batch_size, args.img_size, device)
        new_rows, routes = rows_for(name, cases, dtype, device, args)
        rows += new_rows
    if args.sweep_keys:
        cases = sweep_shapes(args.sweep_keys, args.sweep_head_dims,
                             args.sweep_windows, args.sweep_heads)
        new_rows, routes = rows_for('sweep', cases, dtype, device, args)
        rows += new_rows
    header = ['source', 'query (B, heads, N, d)', 'keys', 'head dim', 'mask'
              ] + [f'{r} (ms)' for r in routes] + [
                  'sdpa/explicit', 'rule', 'rule picks the faster'
              ]
    text = (f'{device_description(device)}; {args.dtype}, forward + '
            f'backward, median of {args.rounds} after {args.warmup} '
            f'warm-up runs, batch {args.batch_size}\n\n' +
            format_table(header, rows) + '\n')
    print(text)
    if args.out:
        with open(args.out, 'w') as file:
            file.write(text)


if __name__ == '__main__':
    main()
