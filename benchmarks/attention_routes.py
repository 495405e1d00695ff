"""Time the two attention routes of mmtnt's plain model on the attention
shapes of real models, to check the route rule of
``mmtnt.models.layers.attention`` (``takes_explicit_route``):
``python -m benchmarks.attention_routes``.

The shapes are recorded from one forward pass of each variant at its
published size and the given batch: every distinct (queries, keys, values,
mask) of its attentions. Each is then timed, forward plus backward, in the
chosen 16-bit dtype, by:

- ``explicit``: ``explicit_attention`` (two products, a float32 softmax);
- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` with
  PyTorch's choice of kernel;
- ``sdpa-no-flash``: the same with FlashAttention ruled out (cuDNN,
  memory-efficient and math kernels allowed; on a GPU only).

The routes of a shape take turns in interleaved rounds
(:func:`benchmarks.measure.interleaved_rounds`). A route that fails on a
shape (a kernel refusing it) is printed and shown as ``nan``.

``--sweep-keys`` adds self-attention over windows of those many keys at
``--sweep-head-dims`` (whether few keys favour the explicit route). The
table gives medians and the route the rule picks.

Examples::

    python -m benchmarks.attention_routes tnt-s svt-s --device cuda
    python -m benchmarks.attention_routes --device cuda \\
        --sweep-keys 16 25 49 64 100 --sweep-head-dims 32 64
"""
import argparse
import statistics
from functools import partial
from unittest import mock

import torch
import torch.nn.functional as F

from mmtnt.analysis import format_table
from mmtnt.models.layers import attention as attention_module
from mmtnt.models.layers.attention import (explicit_attention,
                                           takes_explicit_route)
from .measure import interleaved_rounds, timed
from .options import (add_run_options, checked_args, checked_device,
                      device_description, rounds_note)
from .variants import build_mmtnt, resolve_benchmark

DTYPES = dict(bfloat16=torch.bfloat16, float16=torch.float16)


def recorded_shapes(name, batch_size, img_size, device):
    """The distinct attention inputs of one forward pass of a variant.

    Args:
        name (str): A variant of :func:`benchmarks.variants.variants`.
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
    # The plain model's attentions call their class's ``auto_attention``.
    with torch.no_grad(), mock.patch.object(
            attention_module.MultiheadAttention, 'auto_attention',
            staticmethod(record)):
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


def route_step(route, shapes, mask, dtype, device, seed=0):
    """A callable running forward plus backward of ``route`` on random
    inputs of ``shapes``.

    Args:
        route (Callable): An attention function, from :func:`route_runners`.
        shapes (tuple): Query, key and value shapes.
        mask (Tensor, optional): The attention mask.
        dtype (torch.dtype): Of the random inputs.
        device (torch.device): Where to run.
        seed (int): Seeds the inputs.

    Returns:
        Callable[[], None]: The step.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(s, device=device, generator=gen).to(dtype)
               .requires_grad_() for s in shapes)
    if mask is not None and mask.is_floating_point():
        mask = mask.to(device=device, dtype=dtype)
    grad = torch.randn(q.shape[:-1] + v.shape[-1:], device=device,
                       generator=gen).to(dtype)
    return lambda: route(q, k, v, attn_mask=mask).backward(grad)


def time_routes(source, shapes, mask, dtype, device, args):
    """Median seconds of every route on one case, the routes taking turns;
    a route that fails on it is printed and gets ``nan``.

    Returns:
        dict: Route name -> seconds.
    """
    runners, times = {}, {}
    for name, route in route_runners(device).items():
        step = route_step(route, shapes, mask, dtype, device, args.seed)
        try:
            step()
        except RuntimeError as error:  # a kernel that refuses the shape
            print(f'{source} {shapes[0]} {name}: {error}'.splitlines()[0])
            times[name] = float('nan')
            continue
        runners[name] = partial(timed, step, device)
    measured = interleaved_rounds(runners, args.warmup, args.rounds)
    for name, seconds in measured.items():
        times[name] = statistics.median(seconds)
    return {name: times[name] for name in route_runners(device)}


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
    rows = []
    for *shapes, mask in cases:
        times = time_routes(source, shapes, mask, dtype, device, args)
        example = [torch.empty(s, dtype=dtype, device=device) for s in shapes]
        rule = 'explicit' if takes_explicit_route(*example) else 'sdpa'
        # A failed route (nan) counts as the slower.
        faster = min(('explicit', 'sdpa'),
                     key=lambda r: (times[r] != times[r], times[r]))
        rows.append([source] + describe(shapes, mask) + [
            f'{t * 1000:.3f}' for t in times.values()
        ] + [f'{times["sdpa"] / times["explicit"]:.2f}', rule,
             'yes' if rule == faster else 'no'])
    return rows, list(route_runners(device))


def parse_args(argv=None):
    """The options of ``python -m benchmarks.attention_routes``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: ``img_size`` as (H, W) or None.
    """
    parser = argparse.ArgumentParser(
        description='Time the explicit and fused attention routes on the '
        'attention shapes of real models.')
    parser.add_argument(
        'names', nargs='*', help='variants of python -m benchmarks.benchmark')
    add_run_options(parser, device='cuda', warmup=3, rounds=10)
    parser.add_argument('--dtype', default='bfloat16', choices=list(DTYPES))
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--sweep-keys', type=int, nargs='*', default=[])
    parser.add_argument(
        '--sweep-head-dims', type=int, nargs='+', default=[32, 64])
    parser.add_argument(
        '--sweep-windows',
        type=int,
        default=4096,
        help='windows (batch x windows) of the key sweep')
    parser.add_argument('--sweep-heads', type=int, default=2)
    parser.add_argument('--out', help='also write the markdown here')
    args = checked_args(parser, parser.parse_args(argv),
                        positive=('rounds', ))
    if not args.names and not args.sweep_keys:
        parser.error('give variants, --sweep-keys, or both.')
    return args


def main(argv=None):
    """Time the routes and print the table.

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
            f'backward, {rounds_note(args)}, batch {args.batch_size}\n\n' +
            format_table(header, rows) + '\n')
    print(text)
    if args.out:
        with open(args.out, 'w') as file:
            file.write(text)


if __name__ == '__main__':
    main()
