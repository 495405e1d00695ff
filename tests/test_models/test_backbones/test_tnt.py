"""Contract tests of mmtnt.TNT over every arch and layout."""
import pytest
import torch
from mmengine.registry import MODELS as ROOT_MODELS
from tiny_backbones import TNT_TINY as TINY

from mmtnt.models import TNT

LAYOUTS = ['official', 'legacy']


def count_params(module):
    return sum(p.numel() for p in module.parameters())


# The released archs differ from the tiny one in widths, heads and depth
# only (test_param_count_matches_paper builds them).
@pytest.mark.parametrize('layout', LAYOUTS)
def test_cls_token_output_and_backward(layout):
    model = TNT(arch=TINY, layout=layout, drop_path_rate=0.1)
    x = torch.randn(1, 3, 48, 64)
    outs = model(x)
    assert len(outs) == 1
    assert outs[0].shape == (1, model.embed_dims)
    outs[0].sum().backward()
    no_grad = [
        n for n, p in model.named_parameters()
        if p.requires_grad and p.grad is None
    ]
    assert not no_grad, f'parameters without gradient: {no_grad}'


@pytest.mark.parametrize('size', [(16, 16), (48, 80), (112, 32)])
def test_featmap_shapes_at_odd_sizes(size):
    model = TNT(arch=TINY, out_indices=(0, -1), out_type='featmap').eval()
    with torch.no_grad():
        outs = model(torch.randn(2, 3, *size))
    expected = (2, model.embed_dims, size[0] // 16, size[1] // 16)
    assert [o.shape for o in outs] == [expected, expected]


def test_out_types_agree():
    x = torch.randn(2, 3, 32, 48)
    kwargs = dict(arch=TINY, out_indices=(0, 1))
    torch.manual_seed(0)
    featmap = TNT(out_type='featmap', **kwargs).eval()
    avg = TNT(out_type='avg_featmap', **kwargs).eval()
    avg.load_state_dict(featmap.state_dict())
    with torch.no_grad():
        maps, pooled = featmap(x), avg(x)
    for m, p in zip(maps, pooled):
        torch.testing.assert_close(m.mean(dim=(2, 3)), p)


def test_arch_aliases_and_registry():
    assert TNT(arch='Small').arch_settings == TNT.arch_zoo['s']
    model = ROOT_MODELS.build(dict(type='mmtnt.TNT', arch='base'))
    assert isinstance(model, TNT) and model.embed_dims == 640


@pytest.mark.parametrize('arch,expected', [('s', 23.8e6), ('b', 65.6e6)])
def test_param_count_matches_paper(arch, expected):
    # The papers count the 1000-class classifier too.
    model = TNT(arch=arch)
    total = count_params(model) + model.embed_dims * 1000 + 1000
    assert abs(total - expected) / expected < 0.005, total


def test_errors_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"Unknown TNT arch 'xl'.*'s'"):
        TNT(arch='xl')
    with pytest.raises(ValueError, match='exactly the keys'):
        TNT(arch=dict(embed_dims_outer=32))
    with pytest.raises(ValueError, match=r'Invalid out index 12.*\[-12, 11\]'):
        TNT(arch='s', out_indices=12)
    with pytest.raises(ValueError, match='layout'):
        TNT(arch=TINY, layout='new')
    with pytest.raises(ValueError, match='out_type'):
        TNT(arch=TINY, out_type='tokens')
    with pytest.raises(ValueError, match=r'frozen_stages.*\[-1, 2\]'):
        TNT(arch=TINY, frozen_stages=3)
    with pytest.raises(ValueError, match=r'img_size must be a multiple of '
                       r'patch_size=16, got 40x48'):
        TNT(arch=TINY, img_size=(40, 48))


def test_inputs_are_padded_to_the_patch_size():
    """An input whose sides are not multiples of the patch size gives the
    outputs of the same input zero-padded at the right and bottom."""
    model = TNT(arch=TINY, out_type='featmap').eval()
    x = torch.randn(1, 3, 40, 20)
    with torch.no_grad():
        padded = model(torch.nn.functional.pad(x, (0, 12, 0, 8)))
        out = model(x)
        tiny = model(torch.randn(1, 3, 8, 8))
    assert out[0].shape == (1, 16, 3, 2)
    torch.testing.assert_close(out[0], padded[0])
    assert tiny[0].shape == (1, 16, 1, 1)


@pytest.mark.parametrize('frozen_stages', [0, 1, 2])
def test_frozen_stages(frozen_stages):
    model = TNT(arch=TINY, frozen_stages=frozen_stages, drop_rate=0.5)
    model.train()
    frozen = ['word_embed', 'word_pos', 'sentence_proj', 'cls_token',
              'sentence_pos']
    frozen += [f'blocks.{i}.' for i in range(frozen_stages)]
    if frozen_stages == 2:
        frozen.append('norm.')
    for name, param in model.named_parameters():
        assert param.requires_grad != name.startswith(tuple(frozen)), name
    assert not model.drop_after_pos.training
    for i, block in enumerate(model.blocks):
        assert block.training == (i >= frozen_stages)
    out = model(torch.randn(1, 3, 32, 32))[0]
    # A frozen stem and first blocks still let later blocks learn.
    assert out.requires_grad == (frozen_stages < 2)


def test_input_size_other_than_img_size_resizes_position_embedding():
    model = TNT(arch=TINY, img_size=64, out_type='featmap').eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 96, 48))[0].shape == (1, 16, 6, 3)


def test_checkpoint_from_another_size_loads():
    source = TNT(arch=TINY, img_size=64)
    target = TNT(arch=TINY, img_size=(32, 48))
    target.load_state_dict(source.state_dict())
    assert target.sentence_pos.shape == (1, 1 + 2 * 3, 16)
    torch.testing.assert_close(target.sentence_pos[:, 0],
                               source.sentence_pos[:, 0])


def test_checkpoint_that_does_not_fit_is_refused():
    legacy = TNT(arch=TINY, layout='legacy')
    official = TNT(arch=TINY, layout='official')
    with pytest.raises(ValueError, match="layout='legacy' in the backbone"):
        official.load_state_dict(legacy.state_dict())
    foreign = {'outer_pos': torch.zeros(1, 5, 16)}
    with pytest.raises(ValueError, match='tnt2mmtnt.py'):
        official.load_state_dict(foreign, strict=False)


def test_custom_patch_size_and_stride():
    model = TNT(arch=TINY, patch_size=8, first_stride=2, in_channels=1,
                img_size=32, out_type='featmap')
    assert model.word_pos.shape == (1, 16, 4)
    assert model(torch.randn(2, 1, 32, 32))[0].shape == (2, 16, 4, 4)
    with pytest.raises(ValueError, match='first_stride'):
        TNT(arch=TINY, patch_size=8, first_stride=3)


@pytest.mark.parametrize('layout', LAYOUTS)
def test_words_are_contiguous(layout):
    """The inner stream keeps the layout of the pixel embedding's output
    (the residual additions follow their input), so it must be stored word
    by word: otherwise every norm and reshape of every block copies it."""
    model = TNT(arch=TINY, layout=layout, img_size=32)
    words = model.word_embed(torch.randn(2, 3, 32, 32))
    assert words.shape == (8, 16, 4) and words.is_contiguous()
    words, _ = model.blocks[0](words + model.word_pos,
                               torch.randn(2, 5, 16))
    assert words.is_contiguous()
