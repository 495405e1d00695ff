"""The classifiers the benchmarks compare: each published variant of mmtnt's
backbones and its peers in timm, mmpretrain and mmseg.

Every backbone is wrapped into an ImageNet classifier (global average
pooling where the backbone does not pool, a 1000-class linear head), so
that all implementations of a variant run the same task. A
:class:`Benchmark` says what to build and at which size;
:func:`resolve_benchmark` makes one from a variant name (a key of
:data:`VARIANTS`) or a config file, and :func:`build_candidates` builds its
implementations.

Examples:
    >>> import torch
    >>> bench = resolve_benchmark('svt-s', img_size=(64, 64))
    >>> models, skipped = build_candidates(bench, torch.device('cpu'),
    ...                                    compare=True, impls=['timm'])
    >>> list(models)
    ['timm']
"""
import os.path as osp
from functools import partial

import torch
import torch.nn as nn

from mmtnt.accel import accelerate_for_cpu
from .flops import default_shape, load_config


class PooledClassifier(nn.Module):
    """A backbone whose last output is pooled (if it is a map) and
    classified by a linear layer.

    Args:
        backbone (nn.Module): Returns a tensor or a tuple of them.
        in_channels (int): Channels of its last output.
        num_classes (int): Outputs of the head. Defaults to 1000.

    Examples:
        >>> model = PooledClassifier(nn.Conv2d(3, 8, 3), 8)
        >>> model(torch.rand(2, 3, 16, 16)).shape
        torch.Size([2, 1000])
    """

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
    returns logits).

    Args:
        classifier (ImageClassifier): The classifier.
    """

    def __init__(self, classifier):
        super().__init__()
        self.classifier = classifier

    def forward(self, x):
        return self.classifier(x, mode='tensor')


def build_mmtnt(backbone_cfg, img_size):
    """An mmtnt backbone in a :class:`PooledClassifier`.

    Args:
        backbone_cfg (dict): The backbone's config (``type='mmtnt.SVT'``).
        img_size (tuple[int, int]): The head's width is read off one
            forward pass at this (H, W).

    Returns:
        PooledClassifier: With initialised weights.

    Examples:
        >>> model = build_mmtnt(dict(type='mmtnt.SVT', arch='s'), (64, 64))
        >>> model.fc.in_features
        512
    """
    from mmtnt.registry import MODELS
    backbone = MODELS.build(dict(backbone_cfg))
    if hasattr(backbone, 'init_weights'):
        backbone.init_weights()
    with torch.no_grad():
        feat = backbone.eval()(torch.zeros(1, 3, *img_size))
    return PooledClassifier(backbone, feat[-1].shape[1])


def build_timm(name, img_size, sized=False):
    """A timm model with random weights.

    Args:
        name (str): timm's model name.
        img_size (tuple[int, int]): The input (H, W).
        sized (bool): Make its position embeddings for ``img_size``.

    Returns:
        nn.Module: The model.
    """
    import timm
    kwargs = dict(img_size=img_size) if sized else {}
    return timm.create_model(name, pretrained=False, **kwargs)


def build_mmpretrain(backbone_cfg, in_channels, img_size, neck=True,
                     sized=False):
    """An mmpretrain ``ImageClassifier`` around an mmpretrain backbone,
    returning logits.

    Args:
        backbone_cfg (dict): The backbone's config in mmpretrain's scope.
        in_channels (int): Channels of the backbone's output.
        img_size (tuple[int, int]): The input (H, W).
        neck (bool): Pool with ``GlobalAveragePooling`` (False for
            backbones that pool themselves).
        sized (bool): Pass ``img_size`` to the backbone.

    Returns:
        TensorModeClassifier: With PyTorch's default initialization.
    """
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
    """An mmseg backbone in a :class:`PooledClassifier`.

    Args:
        backbone_cfg (dict): The backbone's config in mmseg's scope.
        in_channels (int): Channels of its last output.
        img_size (tuple[int, int]): Unused (mmseg's backbones take any).

    Returns:
        PooledClassifier: The classifier.
    """
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
    """The mmtnt backbone and peers of TNT of size ``size`` (s/b)."""
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
    """The mmtnt backbone of PyramidTNT of size ``size``: it exists only in
    mmtnt, so it is measured alone (no ratios)."""
    return dict(
        backbone=dict(type='mmtnt.PyramidTNT', arch=size),
        img_size=192 if size == 'ti' else 256,
        sized=True,
        peers=dict())


#: Variant name -> the mmtnt backbone (``backbone``), its published input
#: side (``img_size``), whether the backbones take the input size
#: (``sized``) and the peers' builders (``peers``, name -> a builder taking
#: ``img_size``).
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
        """The implementations to build.

        Args:
            compare (bool): Add the peers.
            with_plain (bool): With ``compare``, add ``'mmtnt-plain'``
                (mmtnt's backbone that stays without the CPU accelerator)
                after ``'mmtnt'``.

        Returns:
            dict: Implementation name -> builder taking ``img_size``:
            ``'mmtnt'`` first, then ``'mmtnt-plain'``, then the peers.
        """
        impls = dict(mmtnt=partial(build_mmtnt, self.backbone))
        if compare:
            if with_plain:
                impls['mmtnt-plain'] = impls['mmtnt']
            impls.update(self.peers)
        return impls


def matching_variant(backbone):
    """The variant whose backbone has the type and arch of ``backbone``.

    Args:
        backbone (dict): A backbone's config.

    Returns:
        dict | None: The entry of :data:`VARIANTS`, or None.

    Examples:
        >>> matching_variant(dict(type='mmtnt.SVT', arch='small'))['img_size']
        224
    """

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

    Raises:
        SystemExit: For an unknown name or a missing config file.

    Examples:
        >>> bench = resolve_benchmark('tnt-s')
        >>> bench.img_size, sorted(bench.peers)
        ((224, 224), ['mmpretrain', 'timm'])
    """
    if name.endswith('.py'):
        cfg = load_config(name)
        backbone = dict(cfg.model.backbone)
        variant = matching_variant(backbone)
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


def build_candidates(bench, device, compare=False, impls=None,
                     cpu_accel=False):
    """Build the implementations of a benchmark; those that cannot be
    built (a peer's library missing, a name it lacks) are left out.

    Args:
        bench (Benchmark): What to build.
        device (torch.device): Where the models go.
        compare (bool): Build the peers too.
        impls (list[str], optional): Build only these implementations.
        cpu_accel (bool): On the CPU, apply ``mmtnt.accelerate_for_cpu``
            to mmtnt's backbone and add ``'mmtnt-plain'`` (with
            ``compare``), the backbone without it.

    Returns:
        tuple[dict, dict]: Implementation name -> model; the names left out
        -> why.

    Examples:
        >>> models, skipped = build_candidates(
        ...     resolve_benchmark('pyramidtnt-ti', (64, 64)),
        ...     torch.device('cpu'))
        >>> list(models), skipped
        (['mmtnt'], {})
    """
    accelerated = cpu_accel and device.type == 'cpu'
    models, skipped = {}, {}
    for impl, build in bench.builders(compare, accelerated).items():
        if impls and impl not in impls:
            continue
        try:
            models[impl] = build(img_size=bench.img_size).to(device)
        except (ImportError, KeyError) as error:
            skipped[impl] = f'{type(error).__name__}: {error}'
            continue
        if impl == 'mmtnt' and accelerated:
            accelerate_for_cpu(models[impl].backbone)
    return models, skipped
