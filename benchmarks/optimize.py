"""ONNX Runtime's transformer graph optimizations for fp32 graphs, for the
benchmarks that compare them: off in mmtnt's deployment, where they made
the graphs slower.

:func:`optimize_onnx` runs the fusions of
``onnxruntime.transformers.optimizer`` (its ``'vit'`` model type) on an
fp32 graph of :func:`mmtnt.deploy.export_onnx`, those of :data:`FUSIONS`
that it is asked for:

- ``'layer_norm'``: ``LayerNormalization`` from the mean / variance ops a
  LayerNorm was exported as;
- ``'gelu'``: ``Gelu`` from its ``Erf`` formula;
- ``'bias_gelu'``: a linear layer's bias addition and the GELU after it in
  one ``BiasGelu``;
- ``'skip_layer_norm'``: a residual addition and the LayerNorm after it in
  one ``SkipLayerNormalization``;
- ``'bias_skip_layer_norm'``: the bias addition before such a node, into
  it;
- ``'attention'``: ONNX Runtime's ``Attention`` op for the blocks whose
  attention has its pattern (the heads and the width are detected); mmtnt's
  blocks (TNT's inner and outer attention, PyramidTNT's and Twins'
  sub-sampled and windowed attention) reshape their tokens between the
  products and do not have it.

With ``opt_level=1`` ONNX Runtime's basic graph optimizations (constant
folding, redundant nodes removed; in a graph of fixed size, a product and
its bias become ``Gemm``, which leaves no bias for ``BiasGelu``), which do
not depend on the CPU, run first; by default (0) only the fusions run, and
ONNX Runtime applies its basic optimizations when it loads the graph. The
fused nodes are ONNX Runtime's contrib ops (domain
``com.microsoft``): the graph runs in ONNX Runtime only. Its outputs equal
the original's within float rounding.

ONNX Runtime applies some of the same fusions itself when it loads a graph
(``Gelu``, ``BiasGelu`` and ``LayerNormalization`` after the export's own
``Gelu`` and ``LayerNormalization`` ops; a bias addition into the matrix
product). A graph quantized from an optimized one keeps the fusions made
before, whatever the Quantize / Dequantize nodes put between the nodes
afterwards: optimize the fp32 graph first, then pass the optimized file to
:func:`mmtnt.deploy.quantize.quantize_onnx`.
"""
import contextlib
import logging
import os.path as osp

#: ``onnxruntime.transformers.optimizer``'s model type whose fusions apply
#: to vision transformers (ViT's: no embedding LayerNorm, no masks).
MODEL_TYPE = 'vit'
#: The fusions :func:`optimize_onnx` may apply, and the
#: ``FusionOptions`` switch of each.
FUSIONS = dict(
    layer_norm='enable_layer_norm',
    gelu='enable_gelu',
    bias_gelu='enable_bias_gelu',
    skip_layer_norm='enable_skip_layer_norm',
    bias_skip_layer_norm='enable_bias_skip_layer_norm',
    attention='enable_attention')
#: The ``FusionOptions`` switches of language models, always off.
TEXT_FUSIONS = ('enable_embed_layer_norm', 'enable_rotary_embeddings',
                'enable_qordered_matmul')
#: The fusions of :func:`optimize_onnx` by default.
DEFAULT_FUSIONS = ('layer_norm', 'gelu', 'bias_gelu', 'skip_layer_norm',
                   'bias_skip_layer_norm')
#: ONNX Runtime's graph optimization levels that ``optimize_model`` takes
#: and that give a graph for any CPU: 0 (the fusions only) and 1 (ONNX
#: Runtime's basic optimizations first). Levels 2 and 99 write fusions of
#: one execution provider.
OPT_LEVELS = (0, 1)


def optimize_onnx(onnx_file,
                  output_file,
                  fusions=DEFAULT_FUSIONS,
                  opt_level=0):
    """Write an fp32 graph with ONNX Runtime's transformer fusions (see the
    module docstring).

    Args:
        onnx_file (str): The fp32 graph, e.g. from
            :func:`mmtnt.deploy.export_onnx` (a classifier, segmentor or
            detector; dynamic axes included).
        output_file (str): The optimized graph to write.
        fusions (Sequence[str]): Which of :data:`FUSIONS` to apply.
            Defaults to :data:`DEFAULT_FUSIONS` (all but attention).
        opt_level (int): 0 (the default) runs the fusions only, 1 ONNX
            Runtime's basic graph optimizations before them
            (:data:`OPT_LEVELS`).

    Returns:
        dict[str, int]: How many nodes of each fused operator type the
        written graph has (``get_fused_operator_statistics()``, without
        zeros). ``LayerNormalization`` and ``Gelu`` count the export's own
        nodes too.

    Raises:
        ValueError: An unknown fusion or an opt_level outside
            :data:`OPT_LEVELS`.
        FileNotFoundError: If ``onnx_file`` is missing.

    Examples:
        >>> from benchmarks.optimize import optimize_onnx
        >>> optimize_onnx('tnt-s.onnx', 'tnt-s-opt.onnx')
        {'BiasGelu': 24, 'LayerNormalization': 39, \
'SkipLayerNormalization': 36}
        >>> optimize_onnx('tnt-s.onnx', 'tnt-s-ln.onnx',
        ...               fusions=['layer_norm', 'gelu'])  # nothing fused
        {'Gelu': 24, 'LayerNormalization': 75}
    """
    unknown = sorted(set(fusions) - set(FUSIONS))
    if unknown:
        raise ValueError(f'Unknown fusions {unknown}: use some of '
                         f'{tuple(FUSIONS)}.')
    if opt_level not in OPT_LEVELS:
        raise ValueError(f'opt_level must be one of {OPT_LEVELS}, got '
                         f'{opt_level!r}.')
    if not osp.isfile(onnx_file):
        raise FileNotFoundError(f'ONNX file {onnx_file} not found.')
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model
    options = FusionOptions(MODEL_TYPE)
    for name, switch in FUSIONS.items():
        setattr(options, switch, name in fusions)
    for switch in TEXT_FUSIONS:
        setattr(options, switch, False)
    with warnings_silenced():
        optimized = optimize_model(
            onnx_file,
            model_type=MODEL_TYPE,
            num_heads=0,
            hidden_size=0,
            optimization_options=options,
            opt_level=opt_level,
            use_gpu=False)
    optimized.save_model_to_file(output_file)
    return {
        name: count
        for name, count in optimized.get_fused_operator_statistics().items()
        if count
    }


@contextlib.contextmanager
def warnings_silenced():
    """Log no warnings while the optimizer runs: its symbolic shape
    inference warns once per size it cannot compare (hundreds of lines for
    a graph with dynamic axes), and it asks for the number of heads, which
    it detects."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)
