"""INT8 ONNX graphs for the CPU, through ONNX Runtime's quantization.

:func:`quantize_onnx` turns an fp32 graph of
:func:`mmtnt.deploy.export_onnx` (classifier, segmentor or detector,
dynamic axes included) into one whose matrix products run in 8-bit
integers:

- ``'dynamic'``: ``quantize_dynamic``. The weights of the ``MatMul`` and
  ``Gemm`` nodes are stored in int8 (per output channel); their inputs are
  quantized at run time, per tensor (``DynamicQuantizeMatMul``). No
  calibration data. Convolutions stay fp32: ONNX Runtime's ``ConvInteger``
  is slower on the CPU than its fp32 convolution.
- ``'static'``: ``quantize_static`` in the QDQ format, int8 weights (per
  output channel) and uint8 activations, whose ranges are calibrated on
  example inputs (:func:`calibration_inputs`); ONNX Runtime fuses the
  QuantizeLinear / DequantizeLinear pairs around ``MatMul``, ``Gemm`` and
  ``Conv`` into ``QLinearMatMul`` and ``QLinearConv``.

Both keep in fp32 what :data:`QUANTIZED_OP_TYPES` leaves out (the
LayerNorms, softmaxes, GELUs, additions, reshapes and transposes) and the
products of two activations in attention (``q @ k^T``, ``attn @ v``, see
:func:`activation_products`) and products that do not depend on the
image (position terms resized to its grids, see
:func:`image_independent_nodes`); the static mode also keeps the patch
embedding (the first weighted node after the image) and the last weighted
nodes before the outputs (the classifier's linear head, a segmentor's
``conv_seg``, see :func:`boundary_nodes`). Each of these, quantized, lowered
the agreement of the demos' INT8 outputs with the fp32 ones without making
the S-size models faster; docs/inference.md gives the measurements.

In a detector graph only the backbone's, the neck's and the heads'
products are quantized: the box decoding, ``TopK``, ``NonMaxSuppression``,
``RoiAlign``, ``Gather`` and the optional ``img_shape`` input stay as they
are between them, and the outputs keep their types (float boxes, scores
and a Mask R-CNN's ``roi_masks``, int64 labels). The static mode keeps in
fp32 the layers whose outputs these ops read first: the classification
and box layers of the dense heads, the RPN and the box head, and the mask
head's last convolution (:func:`boundary_nodes`).

``optimize=True`` first applies ONNX Runtime's transformer fusions
(:func:`mmtnt.deploy.optimize.optimize_onnx`) to the fp32 graph.

The int8 weights use 7 bits (``reduce_range``, values in [-64, 64]) by
default, so that a graph computes the same on every x86-64 CPU. ONNX
Runtime multiplies uint8 activations by int8 weights with ``VPMADDUBSW``
on CPUs with AVX2, or AVX-512 without VNNI: it adds two neighbouring
products into a saturating 16-bit integer. With 8-bit weights such a sum
reaches 2 * 255 * 128 = 65,280 and is clipped at 32,767; with 7-bit
weights it stays within 2 * 255 * 64 = 32,640. CPUs with VNNI
(``VPDPBUSD``) add into 32 bits and never saturate, so there the full
8-bit range is a little more precise and just as fast; a graph quantized
on one machine, though, is run on others. :func:`cpu_int8_features` says
which kind of CPU runs the code.
"""
import copy
import os.path as osp
import tempfile

import numpy as np

#: The quantization modes of :func:`quantize_onnx`.
MODES = ('dynamic', 'static')
#: The ONNX op types quantized in each mode; every other op stays fp32.
QUANTIZED_OP_TYPES = dict(
    dynamic=('MatMul', 'Gemm'), static=('MatMul', 'Gemm', 'Conv'))
#: Calibration methods of the static mode (ONNX Runtime's
#: ``CalibrationMethod`` names).
CALIBRATION_METHODS = dict(
    minmax='MinMax', percentile='Percentile', entropy='Entropy')
#: Ops whose outputs only describe shapes: a walk from the image along
#: the data does not follow them.
SHAPE_OPS = ('Shape', 'Size')
#: The largest magnitude of the int8 weights of a graph written with
#: ``reduce_range=True``: two products of uint8 activations by such
#: weights add up to at most 2 * 255 * 64 = 32,640, within a 16-bit sum.
REDUCED_WEIGHT_LIMIT = 64
#: The CPU flags (Linux ``/proc/cpuinfo`` names) that decide how ONNX
#: Runtime multiplies 8-bit integers on x86-64.
INT8_CPU_FLAGS = dict(
    avx2='AVX2',
    avx512f='AVX-512',
    avx512_vnni='AVX-512 VNNI',
    avx_vnni='AVX-VNNI')


class ArrayDataReader:
    """ONNX Runtime's calibration data reader over arrays: one run per
    array.

    Args:
        arrays (Sequence[np.ndarray]): Inputs (N, C, H, W); their sizes may
            differ for a graph with dynamic axes.
        input_name (str): The graph's input.

    Examples:
        >>> reader = ArrayDataReader([np.zeros((1, 3, 8, 8))], 'input')
        >>> reader.get_next()['input'].dtype, reader.get_next()
        (dtype('float32'), None)
    """

    def __init__(self, arrays, input_name):
        self.arrays = list(arrays)
        self.input_name = input_name
        self.position = 0

    def get_next(self):
        """The next input as a feed dict, None after the last."""
        if self.position >= len(self.arrays):
            return None
        array = self.arrays[self.position]
        self.position += 1
        return {self.input_name: np.ascontiguousarray(array, np.float32)}

    def rewind(self):
        """Start again from the first array."""
        self.position = 0


def graph_input_name(model):
    """The name of the only input of an ONNX model that is not a weight.

    Args:
        model (onnx.ModelProto): The graph.

    Returns:
        str: Its name.
    """
    weights = {tensor.name for tensor in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in weights]
    if len(names) != 1:
        raise ValueError(f'Expected a graph with one input, got {names}.')
    return names[0]


def tensor_consumers(model):
    """Tensor name -> the nodes of an ONNX graph that read it."""
    consumers = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return consumers


def boundary_nodes(model, op_types=QUANTIZED_OP_TYPES['static']):
    """The weighted nodes next to the graph's input and outputs.

    Walking from the input along the data (not through ``Shape``), the
    first nodes of ``op_types`` with a weight; walking back from the
    outputs, the last ones. For mmtnt's graphs these are the patch
    embedding and the classifier's head (a segmentor's ``conv_seg``, a
    detector's classification and box convolutions).

    Args:
        model (onnx.ModelProto): The graph.
        op_types (Sequence[str]): The weighted op types.

    Returns:
        tuple[list[str], list[str]]: Names of the first and the last
        nodes.
    """
    weights = {tensor.name for tensor in model.graph.initializer}
    consumers = tensor_consumers(model)
    producer = {name: node for node in model.graph.node
                for name in node.output}

    def weighted(node):
        return node.op_type in op_types and any(name in weights
                                                for name in node.input)

    def walk(start, neighbours, stop):
        found, seen, tensors = [], set(), list(start)
        while tensors:
            for node in neighbours(tensors.pop()):
                if node.name in seen or node.op_type in stop:
                    continue
                seen.add(node.name)
                if weighted(node):
                    found.append(node.name)
                else:
                    tensors.extend(node.output if neighbours is next_nodes
                                   else node.input)
        return found

    def next_nodes(tensor):
        return consumers.get(tensor, [])

    def previous_nodes(tensor):
        node = producer.get(tensor)
        return [] if node is None or tensor in weights else [node]

    first = walk([graph_input_name(model)], next_nodes, SHAPE_OPS)
    last = walk([out.name for out in model.graph.output], previous_nodes,
                ())
    return first, last


def image_independent_nodes(model, op_types):
    """The nodes of ``op_types`` whose outputs do not depend on the values
    of the graph's image: no walk from the input along the data (not
    through ``Shape``) reaches them.

    In a dynamic graph these compute from weights and sizes only: the
    bicubic resizing of learned position terms to the input's token grids,
    exported as products of interpolation matrices and the weights
    (:func:`mmtnt.deploy.graphs.separable_interpolate`). Quantized, they
    would only round the position terms, and ONNX Runtime's
    ``DynamicQuantizeMatMul`` refuses those whose weight has more than two
    axes.

    Args:
        model (onnx.ModelProto): The graph.
        op_types (Sequence[str]): The op types asked about.

    Returns:
        list[str]: Their names.
    """
    consumers = tensor_consumers(model)
    reached, tensors = set(), [graph_input_name(model)]
    while tensors:
        for node in consumers.get(tensors.pop(), []):
            if node.name in reached or node.op_type in SHAPE_OPS:
                continue
            reached.add(node.name)
            tensors.extend(node.output)
    return [
        node.name for node in model.graph.node
        if node.op_type in op_types and node.name not in reached
    ]


def activation_products(model):
    """The ``MatMul`` nodes of a graph that multiply two activations (no
    input is a weight): attention's ``q @ k^T`` and ``attn @ v``.

    Quantized in the QDQ format, their outputs and inputs carry
    QuantizeLinear / DequantizeLinear pairs that ONNX Runtime fuses with
    the softmax between them into ``QLinearSoftmax``, which is slower on
    the CPU than the fp32 softmax; ONNX Runtime's ``MatMulConstBOnly``
    option, which would skip them, applies to the QOperator format only.

    Args:
        model (onnx.ModelProto): The graph.

    Returns:
        list[str]: Their names.
    """
    weights = {tensor.name for tensor in model.graph.initializer}
    weights.update(name for node in model.graph.node
                   if node.op_type == 'Constant' for name in node.output)
    return [
        node.name for node in model.graph.node if node.op_type == 'MatMul'
        and not any(name in weights for name in node.input)
    ]


def cpu_int8_features(cpuinfo='/proc/cpuinfo'):
    """The x86-64 instruction sets of this CPU that decide how ONNX
    Runtime runs 8-bit integer products (:data:`INT8_CPU_FLAGS`), and
    whether an INT8 graph with 8-bit weights may saturate on it.

    Args:
        cpuinfo (str): The file that lists the CPU's flags. Defaults to
            Linux's ``/proc/cpuinfo``.

    Returns:
        dict: ``features`` (list[str], e.g. ``['AVX2', 'AVX-512',
        'AVX-512 VNNI']``; empty where ``cpuinfo`` cannot be read) and
        ``saturates`` (bool | None: True where 8-bit weights can saturate,
        i.e. AVX2 without VNNI; None where the flags are unknown).

    Examples:
        >>> cpu_int8_features()
        {'features': ['AVX2', 'AVX-512', 'AVX-512 VNNI'], 'saturates': False}
    """
    try:
        with open(cpuinfo) as f:
            flags = next((line.split(':', 1)[1].split()
                          for line in f if line.startswith('flags')), None)
    except OSError:
        flags = None
    if flags is None:
        return dict(features=[], saturates=None)
    features = [name for flag, name in INT8_CPU_FLAGS.items() if flag in flags]
    vnni = 'avx512_vnni' in flags or 'avx_vnni' in flags
    return dict(features=features, saturates='avx2' in flags and not vnni)


def check_quantize_args(onnx_file, mode, calibration, calibrate_method):
    """Raise a clear error for arguments :func:`quantize_onnx` refuses."""
    if mode not in MODES:
        raise ValueError(
            f'Unknown quantization mode {mode!r}: use one of {MODES}.')
    if not osp.isfile(onnx_file):
        raise FileNotFoundError(f'ONNX file {onnx_file} not found.')
    if mode == 'static' and (calibration is None or len(calibration) == 0):
        raise ValueError(
            'Static quantization needs calibration inputs: a list of '
            'preprocessed images (N, C, H, W), e.g. from '
            'calibration_inputs(cfg, num_images).')
    if calibrate_method not in CALIBRATION_METHODS:
        raise ValueError(
            f'Unknown calibration method {calibrate_method!r}: use one of '
            f'{tuple(CALIBRATION_METHODS)}.')


def check_histogram_calibration(model, calibration, calibrate_method):
    """Raise a clear error where ONNX Runtime's histogram calibration
    (``'percentile'``, ``'entropy'``) would fail: it stacks each tensor's
    values over all calibration inputs into one array, which takes tensors
    of one shape. Inputs of several sizes change every shape, and the
    tensors of a two-stage detector's RoI heads (after ``RoiAlign``) change
    with the number of RoIs.

    Args:
        model (onnx.ModelProto): The graph.
        calibration (Sequence[np.ndarray]): The calibration inputs.
        calibrate_method (str): One of :data:`CALIBRATION_METHODS`.

    Raises:
        ValueError: For a histogram method on inputs of several shapes or
            on a graph with ``RoiAlign``.
    """
    if calibrate_method == 'minmax':
        return
    shapes = sorted({np.shape(array) for array in calibration})
    if len(shapes) > 1:
        raise ValueError(
            f"calibrate_method={calibrate_method!r} needs calibration "
            f"inputs of one shape, got {shapes}: use 'minmax', or "
            'inputs of one size.')
    if any(node.op_type == 'RoiAlign' for node in model.graph.node):
        raise ValueError(
            f"calibrate_method={calibrate_method!r} cannot calibrate a "
            "two-stage detector, whose RoI heads' tensors change shape with "
            "the number of RoIs: use 'minmax'.")


def quantize_onnx(onnx_file,
                  output_file,
                  mode,
                  calibration=None,
                  calibrate_method='minmax',
                  keep_boundaries=True,
                  reduce_range=True,
                  optimize=False):
    """Write an INT8 version of an fp32 ONNX graph (see the module
    docstring for what is quantized).

    Args:
        onnx_file (str): The fp32 graph (one image input; a detector's
            optional ``img_shape`` is kept), e.g. from
            :func:`mmtnt.deploy.export_onnx`.
        output_file (str): The INT8 graph to write.
        mode (str): ``'dynamic'`` or ``'static'``.
        calibration (Sequence[np.ndarray], optional): Static mode: the
            inputs whose activation ranges set the scales, preprocessed as
            the graph expects (:func:`calibration_inputs`). Ignored by the
            dynamic mode.
        calibrate_method (str): Static mode: ``'minmax'`` (the default),
            ``'percentile'`` or ``'entropy'``.
        keep_boundaries (bool): Static mode: keep the patch embedding and
            the head in fp32 (:func:`boundary_nodes`). Defaults to True.
        reduce_range (bool): Store the weights in 7 bits (at most
            :data:`REDUCED_WEIGHT_LIMIT` in magnitude), which no x86-64
            CPU's integer products saturate (see the module docstring).
            False uses the full 8 bits, which only CPUs with VNNI run
            without saturating. Defaults to True.
        optimize (bool | Sequence[str]): First apply ONNX Runtime's
            transformer fusions to the fp32 graph
            (:func:`mmtnt.deploy.optimize.optimize_onnx`): True for its
            default fusions, or the names of those to apply (of
            :data:`mmtnt.deploy.optimize.FUSIONS`); the fused graph, which
            runs in ONNX Runtime only, is quantized. Defaults to False.

    Raises:
        ValueError: An unknown mode or calibration method; the static mode
            without calibration inputs; a histogram calibration method
            that cannot calibrate the graph
            (:func:`check_histogram_calibration`).
        FileNotFoundError: If ``onnx_file`` is missing.

    Examples:
        >>> quantize_onnx('svt-s.onnx', 'svt-s-int8.onnx', 'dynamic')
        >>> cfg = Config.fromfile('configs/demo/'
        ...     'upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py')
        >>> quantize_onnx('upernet.onnx', 'upernet-int8.onnx', 'static',
        ...               calibration_inputs(cfg, 64, split='train'))
    """
    check_quantize_args(onnx_file, mode, calibration, calibrate_method)
    if not optimize:
        quantize_graph(onnx_file, output_file, mode, calibration,
                       calibrate_method, keep_boundaries, reduce_range)
        return
    from .optimize import DEFAULT_FUSIONS, optimize_onnx
    fusions = DEFAULT_FUSIONS if optimize is True else optimize
    with tempfile.TemporaryDirectory() as folder:
        optimized = osp.join(folder, osp.basename(onnx_file))
        optimize_onnx(onnx_file, optimized, fusions)
        quantize_graph(optimized, output_file, mode, calibration,
                       calibrate_method, keep_boundaries, reduce_range)


def quantize_graph(onnx_file, output_file, mode, calibration,
                   calibrate_method, keep_boundaries, reduce_range):
    """:func:`quantize_onnx` on arguments it has checked, without the
    optimization."""
    import onnx
    from onnxruntime.quantization import (CalibrationMethod, QuantFormat,
                                          QuantType, quantize_dynamic,
                                          quantize_static)
    op_types = list(QUANTIZED_OP_TYPES[mode])
    model = onnx.load(onnx_file, load_external_data=False)
    exclude = image_independent_nodes(model, op_types)
    if mode == 'dynamic':
        quantize_dynamic(
            onnx_file,
            output_file,
            op_types_to_quantize=op_types,
            per_channel=True,
            reduce_range=reduce_range,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=exclude)
        return
    check_histogram_calibration(model, calibration, calibrate_method)
    exclude += activation_products(model)
    if keep_boundaries:
        first, last = boundary_nodes(model)
        exclude += first + last
    quantize_static(
        onnx_file,
        output_file,
        ArrayDataReader(calibration, graph_input_name(model)),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=op_types,
        per_channel=True,
        reduce_range=reduce_range,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=exclude,
        calibrate_method=getattr(CalibrationMethod,
                                 CALIBRATION_METHODS[calibrate_method]))


def calibration_inputs(cfg, num_images, split='val', batch_size=1):
    """Preprocessed images of a config's dataset, as its ONNX graph takes
    them: loaded by the validation pipeline and normalised (and padded)
    by the model's data preprocessor.

    Args:
        cfg (Config): An mmtnt config (classifier, segmentor or detector).
        num_images (int): How many; spread evenly over the dataset (all of
            it when it has fewer).
        split (str): ``'val'``: images of ``cfg.val_dataloader``;
            ``'train'``: those of ``cfg.train_dataloader``'s dataset
            through the validation pipeline (calibration apart from the
            images a model is evaluated on). Defaults to ``'val'``.
        batch_size (int): Images per array. Defaults to 1, which keeps
            each image at its own size.

    Returns:
        list[np.ndarray]: float32 arrays (N, C, H, W).

    Examples:
        >>> cfg = Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')
        >>> arrays = calibration_inputs(cfg, 64, batch_size=32)
        >>> len(arrays), arrays[0].shape
        (2, (32, 1, 32, 32))
    """
    import torch
    from mmengine.registry import DATASETS, DefaultScope
    from mmengine.runner import Runner
    from torch.utils.data import Subset
    if split not in ('val', 'train'):
        raise ValueError(f"split must be 'val' or 'train', got {split!r}.")
    loader_cfg = copy.deepcopy(cfg.val_dataloader)
    dataset_cfg = loader_cfg.dataset
    if split == 'train':
        dataset_cfg = copy.deepcopy(cfg.train_dataloader.dataset)
        dataset_cfg.update(
            pipeline=loader_cfg.dataset.pipeline, test_mode=True)
    preprocessor = build_data_preprocessor(cfg)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        dataset = DATASETS.build(dataset_cfg)
        count = min(num_images, len(dataset))
        indices = np.linspace(0, len(dataset) - 1, count).round().astype(int)
        loader_cfg.update(
            dataset=Subset(dataset, sorted(set(indices.tolist()))),
            batch_size=batch_size,
            num_workers=0,
            persistent_workers=False,
            sampler=dict(type='DefaultSampler', shuffle=False))
        loader = Runner.build_dataloader(loader_cfg)
        with torch.no_grad():
            return [
                preprocessor(batch, False)['inputs'].numpy().astype(
                    np.float32) for batch in loader
            ]


def build_data_preprocessor(cfg):
    """Build the data preprocessor of a config's model, and nothing else
    of the model, under the config's ``default_scope`` (no default scope
    is left behind).

    The model's ``data_preprocessor`` is used, else the config's top-level
    one (as mmengine's Runner does). Where it names no type, the model's
    default is taken: ``ClsDataPreprocessor`` for mmpretrain's
    classifiers, mmengine's ``BaseDataPreprocessor`` for other models.

    Args:
        cfg (Config): An mmtnt config (classifier, segmentor or detector).

    Returns:
        nn.Module: The preprocessor, in eval mode.

    Examples:
        >>> cfg = Config.fromfile(
        ...     'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py')
        >>> type(build_data_preprocessor(cfg)).__name__
        'DetDataPreprocessor'
    """
    from mmengine.registry import MODELS, DefaultScope
    model_cfg = cfg.model
    preprocessor = (model_cfg.get('data_preprocessor')
                    if 'data_preprocessor' in model_cfg else
                    cfg.get('data_preprocessor'))
    preprocessor = copy.deepcopy(preprocessor) or {}
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        if 'type' not in preprocessor:
            preprocessor['type'] = default_preprocessor_type(model_cfg.type)
        return MODELS.build(preprocessor).eval()


def default_preprocessor_type(model_type):
    """The data preprocessor a model builds when its config names none:
    mmpretrain's classifiers ``ClsDataPreprocessor`` (``ImageClassifier``
    sets it), other models mmengine's ``BaseDataPreprocessor``
    (``BaseModel``'s).

    Args:
        model_type (str | type): The model's ``type``, looked up under the
            current default scope.

    Returns:
        str: The preprocessor's type, with its scope.
    """
    from mmengine.registry import MODELS
    from mmpretrain.models.classifiers import BaseClassifier
    model_class = model_type
    if isinstance(model_type, str):
        with MODELS.switch_scope_and_registry(None) as registry:
            model_class = registry.get(model_type)
    classifier = isinstance(model_class, type) and issubclass(
        model_class, BaseClassifier)
    if classifier:
        return 'mmpretrain.ClsDataPreprocessor'
    return 'mmengine.BaseDataPreprocessor'
