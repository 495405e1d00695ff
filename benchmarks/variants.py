"""The classifiers the benchmarks compare: each ImageNet variant of mmtnt's
model index (:func:`mmtnt.analysis.imagenet_variants`) and its peers in
timm, mmpretrain and mmseg, whose settings come from the backbones'
``arch_zoo``.

Every backbone is wrapped into an ImageNet classifier (global average
pooling where the backbone does not pool, a 1000-class linear head), so
that all implementations of a variant run the same task. A
:class:`Benchmark` says what to build and at which size;
:func:`resolve_benchmark` makes one from a variant name (a key of
:func:`variants`) or a config file, and :func:`build_candidates` builds its
implementations. :func:`impl_rows` puts their measurements in table rows,
each peer with its per-round ratios to mmtnt.

Examples:
    >>> import torch
    >>> bench = resolve_benchmark('svt-s', img_size=(64, 64))
    >>> models, skipped = build_candidates(bench, torch.device('cpu'),
    ...                                    compare=True, impls=['timm'])
    >>> list(models)
    ['timm']
"""
import functools
import os.path as osp
from functools import partial

import torch
import torch.nn as nn

from mmtnt.accel import accelerate_for_cpu
from mmtnt.analysis import default_shape, imagenet_variants, load_config
from mmtnt.analysis.flops import ARCH_LETTERS
from mmtnt.models.backbones import PCPVT, SVT, TNT
from .measure import ratio_cell

# The full names of the architectures, as timm and mmpretrain spell them.
SIZE_NAMES = {letter: name for name, letter in ARCH_LETTERS.items()}


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


def twins_peers(kind, arch):
    """The timm, mmpretrain and mmseg builders of Twins ``kind``
    (``'PCPVT'`` or ``'SVT'``) in the architecture ``arch`` (s/b/l)."""
    settings = dict(PCPVT=PCPVT, SVT=SVT)[kind].arch_zoo[arch]
    channels = settings['embed_dims'][-1]
    mmpretrain_cfg = dict(
        type=kind,
        arch=SIZE_NAMES[arch],
        qkv_bias=True,
        norm_after_stage=[False, False, False, True])
    mmseg_cfg = dict(
        type=kind,
        qkv_bias=True,
        out_indices=(3, ),
        drop_path_rate=0.,
        **{key: settings[key]
           for key in ('embed_dims', 'num_heads', 'mlp_ratios', 'depths',
                       'sr_ratios')})
    if kind == 'PCPVT':
        # mmpretrain's PCPVT blocks default to eps 1e-5 (official: 1e-6).
        mmpretrain_cfg['norm_cfg'] = dict(type='LN', eps=1e-6)
    else:
        # mmseg spells the argument so.
        mmseg_cfg.update(
            windiow_sizes=settings['window_sizes'], norm_after_stage=False)
    return dict(
        timm=partial(build_timm, f'twins_{kind.lower()}_{SIZE_NAMES[arch]}'),
        mmpretrain=partial(build_mmpretrain, mmpretrain_cfg, channels),
        mmseg=partial(build_mmseg, mmseg_cfg, channels))


def tnt_peers(arch):
    """The timm and mmpretrain builders of TNT in the architecture
    ``arch`` (s/b)."""
    return dict(
        timm=partial(build_timm, f'tnt_{arch}_patch16_224', sized=True),
        mmpretrain=partial(
            build_mmpretrain,
            dict(type='TNT', arch=arch),
            TNT.arch_zoo[arch]['embed_dims_outer'],
            neck=False,
            sized=True))


def peers_of(backbone):
    """The peers' builders of an mmtnt backbone config (none for
    PyramidTNT, which exists only in mmtnt, and for unknown types).

    Examples:
        >>> sorted(peers_of(dict(type='mmtnt.SVT', arch='small')))
        ['mmpretrain', 'mmseg', 'timm']
    """
    kind = backbone.get('type', '').split('.')[-1]
    arch = backbone.get('arch')
    if not isinstance(arch, str):  # a custom architecture has no peers
        return {}
    arch = ARCH_LETTERS.get(arch, arch)
    if kind in ('PCPVT', 'SVT') and arch in PCPVT.arch_zoo:
        return twins_peers(kind, arch)
    if kind == 'TNT' and arch in TNT.arch_zoo:
        return tnt_peers(arch)
    return {}


@functools.lru_cache(maxsize=None)
def variants():
    """:func:`mmtnt.analysis.imagenet_variants`, read once."""
    return imagenet_variants()


class Benchmark:
    """What to build and at which size.

    Args:
        name (str): Shown in the tables.
        backbone (dict): The mmtnt backbone's config; its ``img_size``, if
            it has one, is set to ``img_size``.
        img_size (tuple[int, int]): Input (H, W).
        peers (dict): Peer name -> builder taking ``img_size``.
        with_cp (bool): Whether mmtnt's backbone recomputes its blocks in
            the backward pass (the peers do not).
    """

    def __init__(self, name, backbone, img_size, peers, with_cp=False):
        self.name = name
        self.backbone = dict(backbone)
        if 'img_size' in self.backbone:
            self.backbone['img_size'] = img_size
        if with_cp:
            self.backbone['with_cp'] = True
        self.img_size = img_size
        self.peers = peers

    @property
    def label(self):
        """The name and input size, as the tables show them."""
        return f'{self.name} ({self.img_size[0]}x{self.img_size[1]})'

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


def resolve_benchmark(name, img_size=None, with_cp=False):
    """A :class:`Benchmark` from a variant name or a config file.

    Args:
        name (str): A key of :func:`variants`, or a config path (its
            ``model.backbone``; its peers are found by type and arch).
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
        return Benchmark(
            osp.basename(name)[:-3], backbone, img_size or tuple(
                default_shape(cfg)[0]), peers_of(backbone), with_cp)
    if name not in variants():
        raise SystemExit(f'Unknown benchmark {name!r}: give a config file '
                         f'or one of {list(variants())}.')
    variant = variants()[name]
    side = variant['side']
    return Benchmark(name, variant['backbone'], img_size or (side, side),
                     peers_of(variant['backbone']), with_cp)


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


def impl_rows(bench, results, value_cells):
    """One table row per implementation: for each measurement its cells
    and, for a peer, the per-round ratio to mmtnt's
    (:func:`~benchmarks.measure.ratio_cell`: time peer/mmtnt, memory
    mmtnt/peer).

    Args:
        bench (Benchmark): What was measured.
        results (dict): Measurement (``'memory'`` for bytes) ->
            implementation -> the values of its rounds.
        value_cells (Callable[[str, list], list[str]]): The cells of one
            measurement's values.

    Returns:
        list[list[str]]: The rows, mmtnt's first.

    Examples:
        >>> rows = impl_rows(
        ...     Benchmark('svt-s', {}, (64, 64), {}),
        ...     dict(train=dict(mmtnt=[1., 2.], timm=[2., 3.])),
        ...     lambda key, values: [str(max(values))])
        >>> rows
        [['svt-s (64x64)', 'mmtnt', '2.0', '-'], \
['svt-s (64x64)', 'timm', '3.0', '1.75 (1.50-2.00)']]
    """
    rows = []
    for impl in next(iter(results.values()), {}):
        row = [bench.label, impl]
        for key, values in results.items():
            row += value_cells(key, values[impl])
            own = values.get('mmtnt')
            if impl == 'mmtnt' or own is None or min(values[impl]) <= 0:
                row.append('-')
            else:
                row.append(ratio_cell(values[impl], own, key != 'memory'))
        rows.append(row)
    return rows


def ratio_title(key):
    """The title of the ratio column after measurement ``key``."""
    return 'memory mmtnt/peer' if key == 'memory' else 'time peer/mmtnt'
