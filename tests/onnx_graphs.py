"""Reading the nodes of the ONNX files that tests export."""
import collections


def graph_nodes(onnx_file):
    """The nodes of an ONNX file, in its functions too."""
    import onnx
    model = onnx.load(onnx_file)
    nodes = list(model.graph.node)
    for function in model.functions:
        nodes += list(function.node)
    return nodes


def op_types(onnx_file):
    """How many nodes of each type an ONNX file has (in its functions
    too), by type."""
    return collections.Counter(node.op_type
                               for node in graph_nodes(onnx_file))
