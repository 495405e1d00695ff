"""The input names of exported graphs and the CPU session every deployment
tool runs them in: ONNX Runtime's, or OpenVINO's (:class:`OpenVINOSession`)
with the same surface."""
import functools
import os.path as osp

import numpy as np

#: The name of an exported graph's image input (N, C, H, W), float32.
INPUT_NAME = 'input'
#: The name of a detector graph's optional second input: the image's height
#: and width before padding, int64 (2, ).
IMG_SHAPE_NAME = 'img_shape'
#: The runtimes :func:`cpu_session` runs a graph in.
BACKENDS = ('onnxruntime', 'openvino')
#: The precisions :func:`cpu_session` runs a graph at: ``bf16`` needs
#: OpenVINO and a CPU with bfloat16 (AVX-512 BF16 or AMX); ``int8`` with
#: OpenVINO loads the IR of :mod:`mmtnt.deploy.quantize_openvino`.
PRECISIONS = ('fp32', 'bf16', 'int8')
#: OpenVINO's ``INFERENCE_PRECISION_HINT`` of each float precision.
OPENVINO_PRECISION_HINTS = dict(fp32='f32', bf16='bf16', int8='f32')
#: Inputs that exported graphs give a default (an initializer of the same
#: name), which OpenVINO's ONNX reader folds into constants:
#: :class:`OpenVINOSession` makes them inputs again, fed their default when
#: not given.
DEFAULTED_INPUTS = (IMG_SHAPE_NAME, )
#: ONNX Runtime's type names of OpenVINO's element types.
ORT_TYPE_NAMES = dict(
    f32='tensor(float)', f16='tensor(float16)', bf16='tensor(bfloat16)',
    i64='tensor(int64)', i32='tensor(int32)', u8='tensor(uint8)',
    i8='tensor(int8)', boolean='tensor(bool)')


def check_choice(kind, value, allowed):
    """Raise a one-line ValueError unless ``value`` is one of ``allowed``.

    Examples:
        >>> check_choice('backend', 'tensorrt', BACKENDS)
        Traceback (most recent call last):
        ...
        ValueError: Unknown backend 'tensorrt': use one of 'onnxruntime', \
'openvino'.
    """
    if value not in allowed:
        raise ValueError(f'Unknown {kind} {value!r}: use one of '
                         + ', '.join(map(repr, allowed)) + '.')


def cpu_session(onnx_file,
                num_threads=None,
                memory_pattern=True,
                backend='onnxruntime',
                precision='fp32',
                spinning=True,
                input_shape=None):
    """A session that runs an exported graph on the CPU.

    Args:
        onnx_file (str): The ONNX file.
        num_threads (int, optional): Intra-op threads; one per core when None.
        memory_pattern (bool): ONNX Runtime's ``enable_mem_pattern``; pass
            False for detectors, whose tensor sizes vary. Defaults to True.
        backend (str): One of :data:`BACKENDS`. Defaults to ONNX Runtime.
        precision (str): One of :data:`PRECISIONS`; ONNX Runtime runs
            ``fp32`` only (its INT8 graph is a file of its own, see
            :func:`~mmtnt.deploy.quantize.quantize_onnx`). Defaults to fp32.
        spinning (bool): ONNX Runtime's ``allow_spinning``: its threads wait
            for work busily after each run. Pass False where another
            runtime runs on the same cores (timing runtimes side by side),
            whose threads would wait for the spinning ones. Defaults to True.
        input_shape (tuple[int], optional): Fix the image input
            (:data:`INPUT_NAME`) to this (N, C, H, W) shape, and the session
            runs that shape only: OpenVINO compiles its kernels for it,
            ONNX Runtime overrides the graph's dynamic dimensions. OpenVINO
            runs the S classifiers up to 30% faster so, ONNX Runtime as
            fast. None keeps the graph's dynamic axes. Defaults to None.

    Returns:
        onnxruntime.InferenceSession | OpenVINOSession: With ``run``,
        ``get_inputs`` and ``get_outputs``.

    Raises:
        ValueError: For an unknown backend or precision, one the backend or
            the CPU lacks, a missing OpenVINO INT8 IR, or an
            ``input_shape`` that is not (N, C, H, W).
        ImportError: For OpenVINO when it is not installed.

    Examples:
        >>> session = cpu_session('svt-s.onnx', 2, backend='openvino',
        ...                       precision='bf16')  # doctest: +SKIP
        >>> scores, = session.run(None, {'input': images})  # doctest: +SKIP
        >>> fixed = cpu_session('svt-s.onnx', 2, backend='openvino',
        ...                     input_shape=(1, 3, 224, 224))  # doctest: +SKIP
    """
    check_choice('backend', backend, BACKENDS)
    check_choice('precision', precision, PRECISIONS)
    if input_shape is not None and len(input_shape) != 4:
        raise ValueError(f'input_shape {tuple(input_shape)} is not '
                         '(N, C, H, W).')
    if backend == 'openvino':
        return OpenVINOSession(onnx_file, num_threads, precision,
                               input_shape)
    if precision != 'fp32':
        raise ValueError(
            f"ONNX Runtime runs precision 'fp32' only, not {precision!r}: "
            "use backend='openvino' for bf16 and int8 (ONNX Runtime's INT8 "
            'graph is a file of its own, from pytorch2onnx.py --int8).')
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.enable_mem_pattern = memory_pattern
    if not spinning:
        options.add_session_config_entry('session.intra_op.allow_spinning',
                                         '0')
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
    if input_shape is not None:
        for name, size in zip(input_dimension_names(onnx_file), input_shape):
            if name:
                options.add_free_dimension_override_by_name(name, size)
    return ort.InferenceSession(
        onnx_file, options, providers=['CPUExecutionProvider'])


def input_dimension_names(onnx_file):
    """The names of the image input's dimensions in ``onnx_file`` (an
    empty string for a fixed one)."""
    import onnx
    graph = onnx.load(onnx_file, load_external_data=False).graph
    image = next(i for i in graph.input if i.name == INPUT_NAME)
    return [dim.dim_param for dim in image.type.tensor_type.shape.dim]


def openvino_core():
    """The one ``openvino.Core`` of the process, or an ImportError of one
    line on how to install OpenVINO.

    Every :class:`OpenVINOSession` compiles through it: OpenVINO's CPU
    plugin gives the compiling thread a signal stack that a second Core,
    once deleted, can leave dangling, and the process then dies at its next
    handled signal (a child process ending after a DataLoader with workers,
    say).
    """
    try:
        import openvino  # noqa: F401
    except ImportError:
        raise ImportError('OpenVINO is not installed: pip install '
                          "'mmtnt[openvino]'.") from None
    return shared_core()


@functools.lru_cache(maxsize=None)
def shared_core():
    import openvino
    return openvino.Core()


def openvino_model_file(onnx_file, precision):
    """The file OpenVINO reads: the ONNX file, or for ``int8`` the IR that
    :func:`~mmtnt.deploy.quantize_openvino.quantize_openvino` writes next
    to it (a ValueError naming the command that makes it when missing)."""
    if precision != 'int8':
        return onnx_file
    from .quantize_openvino import openvino_int8_file
    ir_file = openvino_int8_file(onnx_file)
    if not osp.isfile(ir_file):
        raise ValueError(
            f'No OpenVINO INT8 IR {ir_file} next to {onnx_file}: write it '
            'with tools/deployment/pytorch2onnx.py ... --int8 static '
            '--backend openvino (or mmtnt.deploy.quantize_openvino).')
    return ir_file


def check_bf16(core):
    """Raise a one-line ValueError unless OpenVINO's CPU plugin runs
    bfloat16 on this CPU."""
    capabilities = core.get_property('CPU', 'OPTIMIZATION_CAPABILITIES')
    if 'BF16' not in capabilities:
        raise ValueError(
            "This CPU lacks bfloat16 (OpenVINO's CPU capabilities: "
            + ', '.join(capabilities) + "): use precision 'fp32' or 'int8'.")


def expose_defaulted_inputs(model):
    """Turn the constants OpenVINO made of :data:`DEFAULTED_INPUTS` back
    into parameters of ``model`` (an ``openvino.Model``, changed in place).

    Returns:
        dict[str, np.ndarray]: Each such input's name and default, at most
        int32's largest value.
    """
    import openvino.opset13 as opset
    defaults = {}
    for op in model.get_ops():
        names = op.output(0).get_names() if op.get_output_size() else ()
        name = next((n for n in DEFAULTED_INPUTS if n in names), None)
        if op.get_type_name() != 'Constant' or name is None:
            continue
        # OpenVINO's CPU plugin computes int64 as int32: a default beyond
        # it (UNPADDED, "larger than any input") would wrap around.
        value = np.minimum(op.get_data(), np.iinfo(np.int32).max)
        parameter = opset.parameter(value.shape, value.dtype, name=name)
        parameter.output(0).set_names({name})
        op.output(0).replace(parameter.output(0))
        model.add_parameters([parameter])
        defaults[name] = value
    return defaults


class Port:
    """An input or output of an :class:`OpenVINOSession` as ONNX Runtime
    describes one: ``name``, ``shape`` (None for a dynamic axis) and
    ``type`` (``'tensor(float)'``, ...)."""

    def __init__(self, port):
        self.name = port.get_any_name()
        self.shape = [
            dim.get_length() if dim.is_static else None
            for dim in port.get_partial_shape()
        ]
        element = port.get_element_type().get_type_name()
        self.type = ORT_TYPE_NAMES.get(element, f'tensor({element})')

    def __repr__(self):
        return f'Port(name={self.name!r}, shape={self.shape}, ' \
            f'type={self.type!r})'


class OpenVINOSession:
    """An ONNX graph compiled by OpenVINO for the CPU, run as an ONNX
    Runtime ``InferenceSession`` is (:func:`cpu_session`).

    Shapes stay dynamic where the ONNX declares them so. Outputs are float32
    at every precision (bf16 computes inside the graph).

    Args:
        onnx_file (str): The ONNX file.
        num_threads (int, optional): ``INFERENCE_NUM_THREADS``; OpenVINO's
            default (one per core) when None.
        precision (str): ``fp32``, ``bf16`` or ``int8``.
        input_shape (tuple[int], optional): The image input's one shape
            (N, C, H, W); the ONNX's dynamic axes when None.

    Examples:
        >>> session = OpenVINOSession('svt-s.onnx', 2)  # doctest: +SKIP
        >>> [port.name for port in session.get_outputs()]  # doctest: +SKIP
        ['scores']
    """

    def __init__(self,
                 onnx_file,
                 num_threads=None,
                 precision='fp32',
                 input_shape=None):
        core = openvino_core()
        if precision == 'bf16':
            check_bf16(core)
        config = {
            'INFERENCE_PRECISION_HINT': OPENVINO_PRECISION_HINTS[precision]
        }
        if num_threads is not None:
            config['INFERENCE_NUM_THREADS'] = int(num_threads)
        model = core.read_model(openvino_model_file(onnx_file, precision))
        self.defaults = expose_defaulted_inputs(model)
        if input_shape is not None:
            model.reshape({INPUT_NAME: list(input_shape)})
        self.precision = precision
        self.compiled = core.compile_model(model, 'CPU', config)
        self.request = self.compiled.create_infer_request()
        self.inputs = [Port(port) for port in self.compiled.inputs]
        self.outputs = [Port(port) for port in self.compiled.outputs]

    def get_inputs(self):
        """The graph's inputs (:class:`Port`)."""
        return list(self.inputs)

    def get_outputs(self):
        """The graph's outputs (:class:`Port`)."""
        return list(self.outputs)

    def get_overridable_initializers(self):
        """None: the inputs with a default (:data:`DEFAULTED_INPUTS`) are
        among :meth:`get_inputs`."""
        return []

    def run(self, output_names, feed):
        """Run the graph, as ONNX Runtime's ``InferenceSession.run``.

        Args:
            output_names (list[str] | None): The outputs to return; all when
                None.
            feed (dict[str, np.ndarray]): Input name -> array.

        Returns:
            list[np.ndarray]: The outputs, copied out of OpenVINO's buffers.
        """
        known = {port.name for port in self.inputs}
        unknown = set(feed) - known
        if unknown:
            raise ValueError(f'Unknown inputs {sorted(unknown)}: the graph '
                             f'takes {sorted(known)}.')
        feed = {**self.defaults, **feed}
        results = self.request.infer(
            {name: np.ascontiguousarray(value)
             for name, value in feed.items()})
        names = [port.name for port in self.outputs]
        wanted = names if output_names is None else list(output_names)
        return [
            np.array(results[self.compiled.outputs[names.index(name)]])
            for name in wanted
        ]
