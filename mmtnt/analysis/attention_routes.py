"""Time the two attention routes of mmtnt's plain model on the attention
shapes of real models, to check the route rule of
``mmtnt.models.layers.attention`` (``takes_explicit_route``); the library
behind ``tools/analysis_tools/attention_routes.py``.

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
    >>> from mmtnt.analysis.attention_routes import main
    >>> main(['svt-s', '--device', 'cpu', '--batch-size', '1',
    ...       '--img-size', '64', '--rounds', '2'])  # doctest: +SKIP
"""
import argparse
import statistics
import time
from unittest import mock

import torch
import torch.nn.functional as F

from mmtnt.models.layers import attention as attention_module
from mmtnt.models.layers.attention import (explicit_attention,
                                           takes_explicit_route)
from .options import checked_device, checked_img_size, device_description
from .tables import format_table
from .timing import synchronize
from .variants import build_mmtnt, resolve_benchmark

DTYPES = dict(bfloat16=torch.bfloat16, float16=torch.float16)


def recorded_shapes(name, batch_size, img_size, device):
    """The distinct attention inputs of one forward pass of a variant.

    Args:
        name (str): A variant of :data:`mmtnt.analysis.variants.VARIANTS`.
        batch_size (int): Images of the forward pass.
        img_size (tuple[int, int], optional): Their (H, W); by default the
            variant's published size.
        device (torch.device): Where the model runs.

    Returns:
        list[tuple]: (query shape, key shape, value shape, mask) of every
        distinct attention call, the mask a tensor or None.

    Examples:
        >>> cases = recorded_shapes('tnt-s', 1, (64, 64),
        ...                         torch.device('cpu'))
        >>> [q for q, _, _, _ in cases]
        [(16, 4, 16, 6), (1, 6, 17, 64)]
    """
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
    """Self-attention over windows of each of ``num_keys`` keys.

    Args:
        num_keys (list[int]): Keys (and queries) per window.
        head_dims (list[int]): Head dims, each swept over ``num_keys``.
        num_windows (int): Windows (batch x windows).
        num_heads (int): Heads.

    Returns:
        list[tuple]: Cases as :func:`recorded_shapes` gives them.

    Examples:
        >>> sweep_shapes([16], [32], num_windows=4, num_heads=2)
        [((4, 2, 16, 32), (4, 2, 16, 32), (4, 2, 16, 32), None)]
    """
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
    """Median seconds of forward plus backward of ``route``.

    Args:
        route (Callable): An attention function, from :func:`route_runners`.
        shapes (tuple): Query, key and value shapes.
        mask (Tensor, optional): The attention mask.
        dtype (torch.dtype): Of the random inputs.
        device (torch.device): Where to run.
        args (argparse.Namespace): With ``warmup`` and ``rounds``.

    Returns:
        float: Seconds.
    """
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
    """The cells of a case: query shape, keys, head dim, mask kind."""
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
    """Time every route on every case.

    Args:
        source (str): The first cell of the rows (the variant or
            ``'sweep'``).
        cases (list[tuple]): From :func:`recorded_shapes` or
            :func:`sweep_shapes`.
        dtype (torch.dtype): Of the inputs.
        device (torch.device): Where to run.
        args (argparse.Namespace): With ``warmup`` and ``rounds``.

    Returns:
        tuple[list[list[str]], list[str]]: The rows; the routes timed.
    """
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
    """The options of ``attention_routes.py``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: ``img_size`` as (H, W) or None.
    """
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
    """``attention_routes.py``: time the routes and print the table.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
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
