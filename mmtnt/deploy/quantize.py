"""INT8 ONNX graphs for the CPU, through ONNX Runtime's quantization.

:func:`quantize_onnx` quantizes the matrix products of an fp32 graph of
:func:`mmtnt.deploy.export_onnx` with per-channel int8 weights: ``'dynamic'``
(``MatMul``, ``Gemm``; no calibration) or ``'static'`` (also ``Conv``, QDQ,
activations calibrated on :func:`calibration_inputs`). The weights use 7 bits
by default, which AVX2 CPUs without VNNI do not saturate
(:func:`cpu_int8_features`; docs/inference.md).
"""
import copy
import os.path as osp

import numpy as np

#: The quantization modes of :func:`quantize_onnx`.
MODES = ('dynamic', 'static')
#: The ONNX op types quantized in each mode (dynamic ``ConvInteger`` is
#: slower than an fp32 convolution); every other op stays fp32.
QUANTIZED_OP_TYPES = dict(
    dynamic=('MatMul', 'Gemm'), static=('MatMul', 'Gemm', 'Conv'))
#: Calibration methods of the static mode (ONNX Runtime's
#: ``CalibrationMethod`` names).
CALIBRATION_METHODS = dict(
    minmax='MinMax', percentile='Percentile', entropy='Entropy')
#: Ops whose outputs only describe shapes.
SHAPE_OPS = ('Shape', 'Size')
#: The largest magnitude of the int8 weights written with
#: ``reduce_range=True``.
REDUCED_WEIGHT_LIMIT = 64
#: The CPU flags (Linux ``/proc/cpuinfo`` names) that decide how ONNX
#: Runtime multiplies 8-bit integers on x86-64.
INT8_CPU_FLAGS = dict(
    avx2='AVX2',
    avx512f='AVX-512',
    avx512_vnni='AVX-512 VNNI',
    avx_vnni='AVX-VNNI')


class ArrayDataReader:
    """ONNX Runtime's calibration data reader, one run per array.

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


def weight_names(model):
    """The names of an ONNX graph's initializers."""
    return {tensor.name for tensor in model.graph.initializer}


def graph_input_name(model):
    """The name of the only input of an ONNX graph that is not a weight."""
    weights = weight_names(model)
    names = [i.name for i in model.graph.input if i.name not in weights]
    if len(names) != 1:
        raise ValueError(f'Expected a graph with one input, got {names}.')
    return names[0]


def data_consumers(model):
    """Tensor name -> the nodes that read its values (not only its shape)."""
    consumers = {}
    for node in model.graph.node:
        if node.op_type not in SHAPE_OPS:
            for name in node.input:
                consumers.setdefault(name, []).append(node)
    return consumers


def walk_nodes(start, neighbours, onward):
    """Nodes reached from the tensors ``start``: ``neighbours(tensor)`` gives
    the next nodes, ``onward(node)`` the tensors to go on from."""
    reached, tensors = {}, list(start)
    while tensors:
        for node in neighbours(tensors.pop()):
            if node.name not in reached:
                reached[node.name] = node
                tensors.extend(onward(node))
    return list(reached.values())


def boundary_nodes(model, op_types=QUANTIZED_OP_TYPES['static']):
    """The weighted nodes of ``op_types`` first from the input and last before
    the outputs: the patch embedding and the head, kept fp32 by the static
    mode.

    Returns:
        tuple[list[str], list[str]]: Names of the first and the last nodes.
    """
    weights = weight_names(model)
    consumers = data_consumers(model)
    producer = {name: node for node in model.graph.node
                for name in node.output}

    def weighted(node):
        return node.op_type in op_types and any(name in weights
                                                for name in node.input)

    def previous_nodes(tensor):
        node = producer.get(tensor)
        return [] if node is None or tensor in weights else [node]

    first = walk_nodes([graph_input_name(model)],
                       lambda tensor: consumers.get(tensor, []),
                       lambda node: [] if weighted(node) else node.output)
    last = walk_nodes([out.name for out in model.graph.output],
                      previous_nodes,
                      lambda node: [] if weighted(node) else node.input)
    return ([node.name for node in first if weighted(node)],
            [node.name for node in last if weighted(node)])


def image_independent_nodes(model, op_types):
    """Names of the nodes of ``op_types`` that no data path from the input
    reaches.

    In a dynamic graph these resize the position terms; ONNX Runtime's
    ``DynamicQuantizeMatMul`` refuses their weights of more than two axes.
    """
    consumers = data_consumers(model)
    reached = walk_nodes([graph_input_name(model)],
                         lambda tensor: consumers.get(tensor, []),
                         lambda node: node.output)
    reached = {node.name for node in reached}
    return [
        node.name for node in model.graph.node
        if node.op_type in op_types and node.name not in reached
    ]


def activation_products(model):
    """Names of the ``MatMul`` nodes of two activations (attention's ``q @
    k^T``, ``attn @ v``): quantized, ONNX Runtime fuses a slower
    ``QLinearSoftmax``."""
    weights = weight_names(model)
    weights.update(name for node in model.graph.node
                   if node.op_type == 'Constant' for name in node.output)
    return [
        node.name for node in model.graph.node if node.op_type == 'MatMul'
        and not any(name in weights for name in node.input)
    ]


def cpu_int8_features(cpuinfo='/proc/cpuinfo'):
    """The x86-64 instruction sets that decide how ONNX Runtime runs int8
    products.

    Args:
        cpuinfo (str): The file that lists the CPU's flags.

    Returns:
        dict: ``features`` (list[str], empty where ``cpuinfo`` cannot be read)
        and ``saturates`` (True for AVX2 without VNNI; None where unknown).

    Examples:
        >>> cpu_int8_features('/no/cpuinfo')
        {'features': [], 'saturates': None}
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
    """Raise a ValueError where the histogram calibrations, which take tensors
    of one shape, would fail: inputs of several sizes, or a two-stage detector.
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
                  reduce_range=True):
    """Write an INT8 version of an fp32 ONNX graph (see the module docstring).

    Args:
        onnx_file (str): The fp32 graph, e.g. from
            :func:`~mmtnt.deploy.export_onnx`.
        output_file (str): The INT8 graph to write.
        mode (str): ``'dynamic'`` or ``'static'``.
        calibration (Sequence[np.ndarray], optional): Static mode: preprocessed
            inputs that set the activation ranges (:func:`calibration_inputs`).
        calibrate_method (str): Static mode: ``'minmax'`` (default),
            ``'percentile'`` or ``'entropy'``.
        keep_boundaries (bool): Static mode: keep the patch embedding and the
            head in fp32 (:func:`boundary_nodes`). Defaults to True.
        reduce_range (bool): Store the weights in 7 bits. Defaults to True.

    Examples:
        >>> quantize_onnx('svt-s.onnx', 'svt-s-int8.onnx', 'dynamic')
        ... # doctest: +SKIP
    """
    import onnx
    from onnxruntime.quantization import (CalibrationMethod, QuantFormat,
                                          QuantType, quantize_dynamic,
                                          quantize_static)
    check_quantize_args(onnx_file, mode, calibration, calibrate_method)
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
    """Preprocessed images of a config's dataset, as its ONNX graph takes them.

    Args:
        cfg (Config): An mmtnt config (classifier, segmentor or detector).
        num_images (int): How many, spread evenly over the dataset.
        split (str): ``'val'``, or ``'train'`` through the validation pipeline.
        batch_size (int): Images per array. Defaults to 1.

    Returns:
        list[np.ndarray]: float32 arrays (N, C, H, W).

    Examples:
        >>> cfg = Config.fromfile('configs/demo/'  # doctest: +SKIP
        ...                       'tnt-demo_1xb128_fashion-mnist.py')
        >>> arrays = calibration_inputs(cfg, 64, 'val', 32)  # doctest: +SKIP
        >>> len(arrays), arrays[0].shape  # doctest: +SKIP
        (2, (32, 1, 32, 32))
    """
    import torch
    from mmengine.registry import DefaultScope
    if split not in ('val', 'train'):
        raise ValueError(f"split must be 'val' or 'train', got {split!r}.")
    loader_cfg = copy.deepcopy(cfg.val_dataloader)
    if split == 'train':
        pipeline = loader_cfg.dataset.pipeline
        loader_cfg.dataset = copy.deepcopy(cfg.train_dataloader.dataset)
        loader_cfg.dataset.update(pipeline=pipeline, test_mode=True)
    loader_cfg.update(
        batch_size=batch_size,
        num_workers=0,
        persistent_workers=False,
        sampler=dict(type='DefaultSampler', shuffle=False))

    def spread(length):
        count = min(num_images, length)
        indices = np.linspace(0, length - 1, count).round().astype(int)
        return sorted(set(indices.tolist()))

    preprocessor = build_data_preprocessor(cfg)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        loader, _ = build_loader(loader_cfg, spread)
        with torch.no_grad():
            return [
                preprocessor(batch, False)['inputs'].numpy().astype(
                    np.float32) for batch in loader
            ]


def build_loader(loader_cfg, select=None):
    """A dataloader config's loader over the images ``select(len(dataset))``
    picks (all when None), and the dataset's ``metainfo``."""
    from mmengine.registry import DATASETS
    from mmengine.runner import Runner
    from torch.utils.data import Subset
    loader_cfg = copy.deepcopy(loader_cfg)
    dataset = DATASETS.build(loader_cfg.dataset)
    metainfo = dataset.metainfo
    if select is not None:
        dataset = Subset(dataset, select(len(dataset)))
    loader_cfg.dataset = dataset
    return Runner.build_dataloader(loader_cfg), metainfo


def build_data_preprocessor(cfg):
    """The data preprocessor of a config's model, built alone under its scope,
    in eval mode."""
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
    """The preprocessor type a model builds when its config names none:
    mmpretrain's ``ClsDataPreprocessor`` for classifiers, else mmengine's."""
    from mmengine.registry import MODELS
    from mmpretrain.models.classifiers import BaseClassifier
    model_class = model_type
    if isinstance(model_type, str):
        with MODELS.switch_scope_and_registry(None) as registry:
            model_class = registry.get(model_type)
    if isinstance(model_class, type) and issubclass(model_class,
                                                    BaseClassifier):
        return 'mmpretrain.ClsDataPreprocessor'
    return 'mmengine.BaseDataPreprocessor'
