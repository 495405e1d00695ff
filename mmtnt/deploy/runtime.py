"""Running exported graphs with ONNX Runtime on the CPU: the graphs' input
names and the session every deployment tool uses."""

#: The name of an exported graph's image input (N, C, H, W), float32.
INPUT_NAME = 'input'
#: The name of a detector graph's optional second input: the image's height
#: and width before padding, int64 (2, ).
IMG_SHAPE_NAME = 'img_shape'


def cpu_session(onnx_file, num_threads=None, memory_pattern=True):
    """An ONNX Runtime session on the CPU.

    Args:
        onnx_file (str): The ONNX file.
        num_threads (int, optional): Intra-op threads; ONNX Runtime's
            default (one per core) when None.
        memory_pattern (bool): ONNX Runtime's ``enable_mem_pattern``: one
            block for all intermediate tensors, planned from the last run.
            Pass False for detectors, whose tensors' sizes follow the
            detections (docs/inference.md). Defaults to True.

    Returns:
        onnxruntime.InferenceSession: With the CPU execution provider.

    Examples:
        >>> session = cpu_session('svt-s.onnx', num_threads=2)
        >>> [i.name for i in session.get_inputs()]
        ['input']
    """
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.enable_mem_pattern = memory_pattern
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(
        onnx_file, options, providers=['CPUExecutionProvider'])
