"""The command lines of ``tools/deployment/``.

``pytorch2onnx.py`` (:func:`export_main`) exports an mmtnt model to ONNX,
optionally verifies it against PyTorch (``--verify``) and writes an INT8
graph (``--int8``), for ONNX Runtime or OpenVINO (``--backend``); ``test.py``
(:func:`evaluate_main`) scores an ONNX graph on a config's test set in
either runtime, at fp32, bf16 or INT8 (``--precision``).

Examples::

    python tools/deployment/pytorch2onnx.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py svt-s.pth \\
        --output-file svt-s.onnx --shape 224 224 --dynamic-export --verify
    python tools/deployment/test.py \\
        configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py \\
        retinanet.onnx --threads 2 --backend openvino --precision bf16
"""
import argparse
import os.path as osp
import sys
import time

from ..hub import HubError
from ..utils.cli import add_cfg_options, load_config
from .export import build_model, check_input_size, export_onnx
from .graphs import (describe_preprocessing, export_graph, input_channels,
                     is_detector, output_names)
from .runtime import BACKENDS, IMG_SHAPE_NAME, INPUT_NAME, PRECISIONS
from .verify import DEFAULT_TOLERANCE, padded_check, verify_onnx, verify_sizes

#: Images ``--int8 static`` calibrates on: as many as the INT8 table of
#: docs/inference.md was measured with.
DEFAULT_CALIBRATION_IMAGES = 64


def parse_export_args(argv=None):
    """Parse the command line of ``pytorch2onnx.py``."""
    parser = argparse.ArgumentParser(
        description='Export an mmtnt classifier, segmentor or detector to '
        'ONNX.')
    parser.add_argument('config', help='the config file')
    parser.add_argument(
        'checkpoint',
        nargs='?',
        help='the checkpoint: a file, or mmtnt://NAME[@SOURCE] for '
        'published weights (fetched into the cache, see mmtnt.hub); '
        'without it the weights are randomly initialised (for trying the '
        'export)')
    parser.add_argument(
        '--output-file', required=True, help='the ONNX file to write')
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        required=True,
        metavar=('H', 'W'),
        help='height and width of the input the graph is exported with '
        '(a dynamic export is traced at 512 or more a side, see '
        'mmtnt.deploy.MIN_DYNAMIC_TRACE_SIZE)')
    parser.add_argument(
        '--batch-size',
        type=int,
        default=1,
        help='images per input (with --dynamic-export, any batch works); '
        'detectors take 1')
    parser.add_argument(
        '--opset-version',
        type=int,
        default=None,
        help='the ONNX opset; defaults to the exporter\'s default')
    parser.add_argument(
        '--dynamic-export',
        action='store_true',
        help='make batch, height and width dynamic axes (detectors: '
        'height and width, the batch stays 1)')
    parser.add_argument(
        '--logits',
        action='store_true',
        help='classifiers: export the head\'s logits instead of the class '
        'scores (softmax or sigmoid)')
    parser.add_argument(
        '--mask-output',
        choices=['roi', 'image'],
        default='roi',
        help='Mask R-CNN: output each detection\'s mask probabilities '
        '(roi_masks, K x 28 x 28; paste them with mmtnt.deploy.paste_masks) '
        'or paste them into image masks in the graph (masks, K x h x w; '
        'more memory)')
    parser.add_argument(
        '--verify',
        action='store_true',
        help='compare the --backend runtime with PyTorch on random input '
        '(detectors: with mmdet\'s predict, see mmtnt.deploy.verify); exit '
        'with status 1 when they differ by more than allowed (classifiers: '
        'mmtnt.deploy.CLS_TOLERANCES, segmentors: --tolerance)')
    parser.add_argument(
        '--backend',
        choices=BACKENDS,
        default='onnxruntime',
        help='the runtime --verify runs the graph in (float32), and --int8 '
        'quantizes for: onnxruntime (an *_int8.onnx graph) or openvino '
        '(static only: an INT8 IR next to the ONNX file, through NNCF); '
        'default onnxruntime')
    parser.add_argument(
        '--verify-shape',
        type=int,
        nargs=2,
        metavar=('H', 'W'),
        help='the second input size --verify checks a dynamic export at; '
        'defaults to one of other remainders than --shape (see '
        'mmtnt.deploy.second_shape)')
    parser.add_argument(
        '--verify-image',
        help='detectors: the image --verify resizes to each size (random '
        'pixels without it, which a trained detector may find nothing in)')
    parser.add_argument(
        '--tolerance',
        type=float,
        default=DEFAULT_TOLERANCE,
        help='segmentors: largest relative difference max|onnx - torch| / '
        f'max|torch| accepted by --verify (default {DEFAULT_TOLERANCE})')
    parser.add_argument(
        '--int8',
        choices=['dynamic', 'static'],
        help='also write an INT8 graph for the --backend runtime on the CPU '
        '(mmtnt.deploy.quantize.quantize_onnx, or for openvino '
        'mmtnt.deploy.quantize_openvino): dynamic (int8 weights, no data '
        'needed; onnxruntime only) or static (activations calibrated on '
        '--calibration-images images of the training set)')
    parser.add_argument(
        '--int8-file',
        help='the INT8 graph to write; defaults to the output file with '
        '"_int8" before ".onnx"')
    parser.add_argument(
        '--calibration-images',
        type=int,
        default=DEFAULT_CALIBRATION_IMAGES,
        help='--int8 static: training images, through the validation '
        f'pipeline, to calibrate on (default {DEFAULT_CALIBRATION_IMAGES})')
    add_cfg_options(parser)
    return parser.parse_args(argv)


def load_model(args):
    """The config's model with the checkpoint's weights, or SystemExit."""
    if args.batch_size < 1:
        raise SystemExit('Error: --batch-size must be at least 1.')
    if args.int8 is not None and args.calibration_images < 1:
        raise SystemExit('Error: --calibration-images must be at least 1.')
    if args.int8 == 'dynamic' and args.backend == 'openvino':
        raise SystemExit('Error: --int8 dynamic is ONNX Runtime\'s: '
                         'OpenVINO\'s INT8 is --int8 static.')
    try:
        model = build_model(
            load_config(args.config, args.cfg_options), args.checkpoint)
    except (ValueError, HubError) as error:
        raise SystemExit(f'Error: {error}')
    if is_detector(model) and args.batch_size != 1:
        raise SystemExit('Error: detectors are exported for one image: '
                         '--batch-size must be 1.')
    return model


def int8_file(args):
    """Where ``--int8`` writes: ``--int8-file``, else ``*_int8.onnx``.

    Examples:
        >>> int8_file(parse_export_args(['c.py', '--output-file', 'svt.onnx',
        ...                              '--shape', '224', '224',
        ...                              '--int8', 'dynamic']))
        'svt_int8.onnx'
    """
    if args.int8_file:
        return args.int8_file
    root, ext = osp.splitext(args.output_file)
    return f'{root}_int8{ext or ".onnx"}'


def write_int8(args):
    """Quantize the exported graph as ``--int8`` asks."""
    from .quantize import calibration_inputs, quantize_onnx
    calibration = None
    if args.int8 == 'static':
        calibration = calibration_inputs(
            load_config(args.config, args.cfg_options),
            args.calibration_images,
            split='train')
    if args.backend == 'openvino':
        write_openvino_int8(args, calibration)
        return
    output_file = int8_file(args)
    quantize_onnx(args.output_file, output_file, args.int8, calibration)
    detail = ('7-bit int8 weights, activations quantized at run time'
              if args.int8 == 'dynamic' else
              f'calibrated on {len(calibration)} training images')
    print(f'Wrote the INT8 graph ({args.int8}: {detail}) to {output_file}; '
          'docs/inference.md says which layers stay fp32.')


def write_openvino_int8(args, calibration):
    """``--int8 static --backend openvino``: the INT8 IR next to the ONNX
    file (``--int8-file`` to write it elsewhere)."""
    from .quantize_openvino import quantize_openvino
    output_file = quantize_openvino(args.output_file, calibration,
                                    args.int8_file)
    print(f'Wrote the OpenVINO INT8 IR (NNCF, calibrated on '
          f'{len(calibration)} training images) to {output_file}.')


def format_range(low, high):
    """``[low, high]``, ``inf`` for no ``high``."""
    return f'[{low}, {"inf" if high is None else high}]'


def report_export(args, model, graph, channels, ranges):
    """Print what was exported: inputs, outputs, normalisation, axes."""
    batch = 1 if is_detector(model) else 'N'
    names = ', '.join(repr(name) for name in output_names(graph))
    optional = (f' (and optional {IMG_SHAPE_NAME!r} (2, ) int64, the '
                'height and width before padding)'
                if is_detector(model) else '')
    print(f'Exported {type(model).__name__} to {args.output_file}: input '
          f'{INPUT_NAME!r} ({batch}, {channels}, H, W){optional}, '
          f'output{"s" if ", " in names else ""} {names}.')
    print(describe_preprocessing(model))
    if not ranges:
        print(f'Static input shape ({args.batch_size}, {channels}, '
              f'{args.shape[0]}, {args.shape[1]}).')
        return
    axes = ('height and width (the batch is 1: detectors take one image)'
            if is_detector(model) else 'batch, height and width')
    print(f'Dynamic axes: {axes} (torch.export checked the graph for ' +
          ', '.join(f'{axis} {format_range(*r)}'
                    for axis, r in ranges.items()) +
          '; sizes below those bounds are not excluded, only not checked '
          'by the tracer).')


def verify(args, model, graph, checks, channels):
    """``--verify``: print a line per check; whether all passed."""
    padded = None
    if is_detector(model):
        padded = padded_check(model, checks[-1][1:], args.dynamic_export)
    try:
        report = verify_onnx(
            args.output_file,
            graph,
            checks,
            channels,
            tolerance=args.tolerance,
            image=args.verify_image,
            padded=padded,
            backend=args.backend)
    except (ValueError, ImportError) as error:
        raise SystemExit(f'Error: {error}')
    print(report)
    return report.passed


def export_main(argv=None):
    """Run ``pytorch2onnx.py`` with ``argv`` (``sys.argv`` without it).

    Raises:
        SystemExit: With one line on what is wrong; with status 1 when
            ``--verify`` fails.
    """
    args = parse_export_args(argv)
    model = load_model(args)
    graph = export_graph(
        model, logits=args.logits, mask_output=args.mask_output)
    channels = input_channels(model)
    checks = verify_sizes(graph, args.shape, args.batch_size,
                          args.verify and args.dynamic_export,
                          args.verify_shape)
    try:
        for _, height, width in checks:
            check_input_size(graph, (height, width), channels)
    except ValueError as error:
        raise SystemExit(f'Error: {error}')

    ranges = export_onnx(
        graph,
        args.output_file,
        tuple(args.shape),
        dynamic=args.dynamic_export,
        channels=channels,
        batch_size=args.batch_size,
        opset_version=args.opset_version)
    report_export(args, model, graph, channels, ranges)
    if args.int8 is not None:
        write_int8(args)
    if args.verify and not verify(args, model, graph, checks, channels):
        runtime = dict(onnxruntime='ONNX Runtime',
                       openvino='OpenVINO')[args.backend]
        print(f'Error: {runtime} and PyTorch disagree.', file=sys.stderr)
        raise SystemExit(1)


def parse_evaluate_args(argv=None):
    """Parse the command line of ``tools/deployment/test.py``."""
    parser = argparse.ArgumentParser(
        description='Evaluate an ONNX graph (fp32 or INT8) of a classifier, '
        'segmentor or detector on the test set of its config, with ONNX '
        'Runtime or OpenVINO on the CPU and the config\'s test evaluator.')
    parser.add_argument(
        'config', help='the config the graph was exported from, or one '
        'that inherits it with the data to test on')
    parser.add_argument('model', help='the ONNX file')
    add_cfg_options(parser, 'test_dataloader.dataset.data_root=data/my_set')
    parser.add_argument(
        '--threads',
        type=int,
        help='the runtime\'s intra-op threads (default: one per core)')
    parser.add_argument(
        '--backend',
        choices=BACKENDS,
        default='onnxruntime',
        help='the runtime (default onnxruntime; openvino needs '
        'pip install \'mmtnt[openvino]\')')
    parser.add_argument(
        '--precision',
        choices=PRECISIONS,
        default='fp32',
        help='openvino: fp32, bf16 (CPUs with AVX-512 BF16 or AMX) or int8 '
        '(the IR of pytorch2onnx.py --int8 static --backend openvino); '
        'onnxruntime: fp32 (its INT8 graph is a file of its own) '
        '(default fp32)')
    parser.add_argument(
        '--num-images',
        type=int,
        help='only the first N test images (default: all)')
    parser.add_argument(
        '--work-dir',
        help='write the log and the metrics (JSON) to '
        'WORK_DIR/TIMESTAMP/, as tools/test.py does')
    return parser.parse_args(argv)


def evaluate_main(argv=None):
    """Run ``tools/deployment/test.py`` with ``argv`` (``sys.argv`` without
    it).

    Returns:
        dict: The metrics.
    """
    import mmengine
    from mmengine.logging import MMLogger

    from .evaluate import evaluate_onnx
    args = parse_evaluate_args(argv)
    timestamp = time.strftime('%Y%m%d_%H%M%S', time.localtime())
    log_file = json_file = None
    if args.work_dir is not None:
        log_dir = osp.join(args.work_dir, timestamp)
        mmengine.mkdir_or_exist(log_dir)
        log_file = osp.join(log_dir, f'{timestamp}.log')
        json_file = osp.join(log_dir, f'{timestamp}.json')
    # The current logger: the evaluator's logs and the metrics go to it.
    MMLogger.get_instance(
        f'deploy-test-{timestamp}-{time.monotonic_ns()}',
        log_file=log_file,
        log_level='INFO')
    try:
        metrics = evaluate_onnx(args.config, args.model, args.threads,
                                args.cfg_options, args.num_images,
                                args.backend, args.precision)
    except (FileNotFoundError, ValueError, ImportError) as error:
        raise SystemExit(f'tools/deployment/test.py: {error}')
    if json_file is not None:
        mmengine.dump(
            {
                key: value.tolist() if hasattr(value, 'tolist') else value
                for key, value in metrics.items()
            }, json_file)
    return metrics
