"""Make ``tests/data/pyramid_tnt_golden.pth`` with the official PyramidTNT
code.

The fixture of ``tests/test_converters/test_pyramid_tnt_golden.py``: the
official ``tnt_pytorch/pyramid_tnt.py`` (huawei-noah/Efficient-AI-Backbones
@1a98c857) with a reduced arch (:data:`CONFIGS`, a 10-class head), random
weights that make every key count (norms and biases away from their
initial 1 and 0, running statistics away from 0 and 1), two fixed inputs
and the official fp32 eval outputs (``forward_features`` and the logits):

- ``aligned``: 2x3x64x64, the size the weights are made for;
- ``odd``: 2x3x56x88, whose sentence grids (7x11, 4x6, 2x3, 1x2) are odd
  and not divisible by the spatial reduction. The official constructor
  cannot size ``outer_pos`` and ``relative_pos`` for them, so the fixture
  holds the ones the official forward needs there (``size_tied``), which
  the script puts into the official model in place of its own.

Weights, position terms and inputs are rounded to fp16 and stored so: the
outputs are computed from their fp32 casts, which lose nothing. The
official module needs ``timm`` (1.0 keeps the module paths it imports).
See ``tests/data/README.md`` for the whole procedure.

Examples:
    python tests/data/make_pyramid_tnt_golden.py \\
        PATH/TO/Efficient-AI-Backbones tests/data/pyramid_tnt_golden.pth
    # recompute the official outputs of an existing fixture's weights and
    # inputs, and print how far its stored outputs are from them (relative
    # to their largest magnitude, as the test measures)
    python tests/data/make_pyramid_tnt_golden.py \\
        PATH/TO/Efficient-AI-Backbones /tmp/golden.pth \\
        --reuse tests/data/pyramid_tnt_golden.pth
"""
import argparse
import copy
import importlib.util
import math
import sys
from pathlib import Path

import torch
import torch.nn as nn

COMMIT = '1a98c857'
DESCRIPTION = (
    'Official PyramidTNT code (huawei-noah/Efficient-AI-Backbones '
    f'tnt_pytorch/pyramid_tnt.py @{COMMIT}) with a reduced random arch: its '
    'state dict and fixed inputs (values of fp16 precision, stored as fp16: '
    'cast them to fp32 before use) and its fp32 eval outputs.')
#: The reduced arch in the official ``configs`` form. The 7-block stage
#: runs the inner branch in its blocks 0 and 1 (the official rule for
#: stages of more than 6 blocks), the others in block 0 only.
CONFIGS = dict(
    depths=[1, 7, 1, 1],
    outer_dims=[8, 12, 16, 20],
    inner_dims=[2, 3, 4, 4],
    outer_heads=[2, 2, 4, 4],
    inner_heads=[1, 1, 2, 2])
#: The official spatial reduction of each stage's outer attention.
SR_RATIOS = [4, 2, 1, 1]
NUM_CLASSES = 10
BATCH = 2
ALIGNED_SIZE = 64
ODD_SIZE = (56, 88)


def load_official(repo):
    """Import ``tnt_pytorch/pyramid_tnt.py`` of a checkout of the official
    repository.

    Args:
        repo (Path): The checkout (at :data:`COMMIT`).

    Returns:
        module: The official module.
    """
    path = Path(repo) / 'tnt_pytorch' / 'pyramid_tnt.py'
    if not path.is_file():
        raise SystemExit(f'no {path}: give a checkout of '
                         'huawei-noah/Efficient-AI-Backbones')
    spec = importlib.util.spec_from_file_location('pyramid_tnt', path)
    module = importlib.util.module_from_spec(spec)
    # timm's register_model looks the module up while it runs.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def sentence_grids(height, width):
    """The official sentence grid (H, W) of each stage for an input size:
    the stem's stride 8, then stride-2 convolutions padded by 1."""
    grids = [(height // 8, width // 8)]
    for _ in range(3):
        grids.append(tuple(math.ceil(side / 2) for side in grids[-1]))
    return grids


def to_fp16(tensor):
    """``tensor`` rounded to fp16 (integer tensors unchanged)."""
    return tensor.half() if tensor.is_floating_point() else tensor


def random_value(key, value, gen):
    """A random value for the official state dict entry ``key``.

    Convolution weights and ``relative_pos`` keep the official
    initialization; linear weights and position terms get a standard
    deviation of 0.1 (instead of 0.02), biases 0.1 around 0, norm weights
    0.1 around 1, running means 0.1 around 0 and running variances
    0.5-1.5, so that no entry could be dropped or swapped unnoticed.
    """
    if key.endswith('num_batches_tracked'):
        return torch.tensor(1000)
    if key.endswith('running_var'):
        return 0.5 + torch.rand(value.shape, generator=gen)
    if value.dim() == 4 or key.endswith('relative_pos'):
        return value
    noise = 0.1 * torch.randn(value.shape, generator=gen)
    if value.dim() == 1 and key.endswith('weight'):
        return 1 + noise
    return noise


def size_tied_terms(height, width, gen):
    """The position terms the official forward needs at an input size:
    ``outer_pos`` for the first grid and each stage's ``relative_pos``
    for its grid and the grid its average pooling leaves."""
    grids = sentence_grids(height, width)
    first = grids[0][0] * grids[0][1]
    terms = {
        'outer_pos':
        0.1 * torch.randn(1, first, CONFIGS['outer_dims'][0], generator=gen)
    }
    for i, ((h, w), sr) in enumerate(zip(grids, SR_RATIOS)):
        shape = (1, CONFIGS['outer_heads'][i], h * w, (h // sr) * (w // sr))
        terms[f'stages.{i}.relative_pos'] = torch.randn(shape, generator=gen)
    return {key: to_fp16(value) for key, value in terms.items()}


def with_terms(model, terms):
    """A copy of ``model`` whose parameters named in ``terms`` are replaced
    by those tensors (in fp32), whatever their shapes."""
    model = copy.deepcopy(model)
    for key, value in terms.items():
        owner, _, name = key.rpartition('.')
        module = model.get_submodule(owner)
        setattr(module, name, nn.Parameter(value.float()))
    return model


def official_outputs(model, images):
    """The official ``forward_features`` (final norm, mean over tokens)
    and logits of fp32 ``images``, in eval mode."""
    with torch.no_grad():
        features = model.eval().forward_features(images.float())
        return features, model.head(features)


def make_case(model, size, images, terms=None):
    """One case of the fixture: its size, the inputs, the official outputs
    (and the size-tied terms they were computed with)."""
    if terms is not None:
        model = with_terms(model, terms)
    features, logits = official_outputs(model, images)
    case = dict(img_size=size)
    if terms is not None:
        case['grids'] = [list(grid) for grid in sentence_grids(*size)]
        case['size_tied'] = terms
    case.update(input=images, features=features, logits=logits)
    return case


def make_fixture(official, seed=0, reuse=None):
    """The fixture's dict.

    Args:
        official (module): The official ``pyramid_tnt`` module.
        seed (int): Seed of the weights and inputs.
        reuse (dict, optional): An existing fixture whose weights,
            size-tied terms and inputs are taken instead of new ones.

    Returns:
        dict: What ``tests/data/pyramid_tnt_golden.pth`` holds.
    """
    torch.manual_seed(seed)  # the official initialization
    gen = torch.Generator().manual_seed(seed)
    model = official.PyramidTNT(
        configs=copy.deepcopy(CONFIGS),
        img_size=ALIGNED_SIZE,
        num_classes=NUM_CLASSES)
    if reuse is None:
        state_dict = {
            key: to_fp16(random_value(key, value, gen))
            for key, value in model.state_dict().items()
        }
        aligned_input = to_fp16(
            torch.randn(BATCH, 3, ALIGNED_SIZE, ALIGNED_SIZE, generator=gen))
        odd_terms = size_tied_terms(*ODD_SIZE, gen)
        odd_input = to_fp16(torch.randn(BATCH, 3, *ODD_SIZE, generator=gen))
    else:
        state_dict = reuse['official_state_dict']
        aligned_input = reuse['aligned']['input']
        odd_terms = reuse['odd']['size_tied']
        odd_input = reuse['odd']['input']
    model.load_state_dict({
        key: value.float() if value.is_floating_point() else value
        for key, value in state_dict.items()
    })
    return dict(
        description=DESCRIPTION,
        configs=copy.deepcopy(CONFIGS),
        num_classes=NUM_CLASSES,
        official_state_dict=state_dict,
        aligned=make_case(model, ALIGNED_SIZE, aligned_input),
        odd=make_case(model, list(ODD_SIZE), odd_input, odd_terms))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Make the PyramidTNT golden fixture with the official '
        'code.')
    parser.add_argument(
        'official_repo',
        help='a checkout of huawei-noah/Efficient-AI-Backbones at '
        f'{COMMIT}')
    parser.add_argument('out', help='the fixture file to write')
    parser.add_argument(
        '--seed', type=int, default=0, help='seed of the weights and inputs')
    parser.add_argument(
        '--reuse',
        metavar='FIXTURE',
        help='take the weights, size-tied terms and inputs of this fixture '
        'and recompute the official outputs')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    official = load_official(args.official_repo)
    reuse = None
    if args.reuse:
        reuse = torch.load(args.reuse, weights_only=True)
    fixture = make_fixture(official, args.seed, reuse)
    torch.save(fixture, args.out)
    print(f'wrote {args.out}')
    if reuse is not None:
        for case in ('aligned', 'odd'):
            for name in ('features', 'logits'):
                new, old = fixture[case][name], reuse[case][name]
                error = (new - old).abs().max() / old.abs().max()
                print(f'{case} {name}: largest difference to the stored '
                      f'outputs, relative to their largest: {error:.2g}')


if __name__ == '__main__':
    main()
