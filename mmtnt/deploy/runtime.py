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
        memory_pattern (bool): ONNX Runtime's memory pattern
            (``SessionOptions.enable_mem_pattern``): after a run, the
            next run of the same input shapes gets one block for all its
            intermediate tensors, planned from the last one. Pass False for
            detectors, whose tensors' sizes follow the detections: the
            block then outgrows the tensors it holds (docs/inference.md,
            "Mask R-CNN at 800x1333"). Defaults to True, ONNX Runtime's
            default.

    Returns:
        onnxruntime.InferenceSession: With the CPU execution provider.

    Examples:
        >>> session = cpu_session('svt-s.onnx', num_threads=2)
        >>> [i.name for i in session.get_inputs()]
        ['input']
        >>> session = cpu_session('mask-rcnn.onnx', 2, memory_pattern=False)
    """
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.enable_mem_pattern = memory_pattern
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(
        onnx_file, options, providers=['CPUExecutionProvider'])
