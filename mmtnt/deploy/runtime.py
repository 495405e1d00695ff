"""The input names of exported graphs and the ONNX Runtime CPU session
every deployment tool uses."""

#: The name of an exported graph's image input (N, C, H, W), float32.
INPUT_NAME = 'input'
#: The name of a detector graph's optional second input: the image's height
#: and width before padding, int64 (2, ).
IMG_SHAPE_NAME = 'img_shape'


def cpu_session(onnx_file, num_threads=None, memory_pattern=True):
    """An ONNX Runtime session on the CPU.

    Args:
        onnx_file (str): The ONNX file.
        num_threads (int, optional): Intra-op threads; one per core when None.
        memory_pattern (bool): ONNX Runtime's ``enable_mem_pattern``; pass
            False for detectors, whose tensor sizes vary. Defaults to True.

    Returns:
        onnxruntime.InferenceSession: With the CPU execution provider.
    """
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.enable_mem_pattern = memory_pattern
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(
        onnx_file, options, providers=['CPUExecutionProvider'])
