"""The command line of ``tools/deployment/test.py``: an ONNX graph scored
on a config's test set (:func:`mmtnt.deploy.evaluate.evaluate_onnx`), the
metrics logged as ``tools/test.py`` logs them."""
import argparse
import os.path as osp
import time

from mmengine.config import DictAction


def parse_args(argv=None):
    """Parse ``CONFIG MODEL.onnx [--cfg-options ...] [--threads N]
    [--num-images N] [--work-dir DIR]``.

    Args:
        argv (list[str], optional): Arguments instead of ``sys.argv``.

    Returns:
        argparse.Namespace: The arguments.
    """
    parser = argparse.ArgumentParser(
        description='Evaluate an ONNX graph (fp32 or INT8) of a classifier, '
        'segmentor or detector on the test set of its config, with ONNX '
        'Runtime on the CPU and the config\'s test evaluator.')
    parser.add_argument(
        'config', help='the config the graph was exported from, or one '
        'that inherits it with the data to test on')
    parser.add_argument('model', help='the ONNX file')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, as key=value pairs; e.g. '
        'test_dataloader.dataset.data_root=data/my_set')
    parser.add_argument(
        '--threads',
        type=int,
        help='ONNX Runtime intra-op threads (default: one per core)')
    parser.add_argument(
        '--num-images',
        type=int,
        help='only the first N test images (default: all)')
    parser.add_argument(
        '--work-dir',
        help='write the log and the metrics (JSON) to '
        'WORK_DIR/TIMESTAMP/, as tools/test.py does')
    return parser.parse_args(argv)


def main(argv=None):
    """Run the command line.

    Args:
        argv (list[str], optional): Arguments instead of ``sys.argv``.

    Returns:
        dict: The metrics.

    Raises:
        SystemExit: With one line, for a missing file or dataset path and
            a graph that does not fit the config.

    Examples:
        >>> main(['configs/demo/tnt-demo_1xb128_fashion-mnist.py',
        ...       'tnt.onnx', '--threads', '2'])  # doctest: +SKIP
        {'accuracy/top1': 73.7}
    """
    import mmengine
    from mmengine.logging import MMLogger

    from .evaluate import evaluate_onnx
    args = parse_args(argv)
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
                                args.cfg_options, args.num_images)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f'tools/deployment/test.py: {error}')
    if json_file is not None:
        mmengine.dump(
            {
                key: value.tolist() if hasattr(value, 'tolist') else value
                for key, value in metrics.items()
            }, json_file)
    return metrics
