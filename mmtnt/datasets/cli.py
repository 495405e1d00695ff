"""The command lines of ``tools/dataset_converters/``:
``prepare_fashion_mnist.py`` and ``make_demo_scenes.py``, reading the
Fashion-MNIST files of the Debian package, or of ``--src``."""
import argparse
import os.path as osp
import sys

from .fashion_mnist import DEB_PACKAGE, prepare


def build_parser(description, default_out_dir):
    """A parser of ``[OUT_DIR] [--src DIR]``, the options both commands
    take."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        'out_dir',
        nargs='?',
        default=default_out_dir,
        help=f'output folder (default: {default_out_dir})')
    parser.add_argument(
        '--src',
        help='folder holding the Fashion-MNIST idx files, gzipped or not '
        f'(default: the files of the Debian package {DEB_PACKAGE}, found '
        'with dpkg -L)')
    return parser


def fail(error):
    """Print ``error: ...`` on stderr; the exit status 1."""
    print(f'error: {error}', file=sys.stderr)
    return 1


def fashion_mnist_main(argv=None):
    """Run ``prepare_fashion_mnist.py`` on ``argv`` (else ``sys.argv``);
    returns the exit status."""
    parser = build_parser(
        'Un-gzip Fashion-MNIST (Debian package '
        f'{DEB_PACKAGE}) into the layout of mmpretrain\'s FashionMNIST.',
        osp.join('data', 'fashion_mnist'))
    args = parser.parse_args(argv)
    try:
        written = prepare(args.out_dir, args.src)
    except (FileNotFoundError, RuntimeError) as error:
        return fail(error)
    if written:
        print(f'Fashion-MNIST written to {args.out_dir}: {", ".join(written)}')
    else:
        print(f'Fashion-MNIST already complete in {args.out_dir}')
    return 0


def demo_scenes_main(argv=None):
    """Run ``make_demo_scenes.py`` on ``argv`` (else ``sys.argv``);
    returns the exit status."""
    # Imported here: the Fashion-MNIST command runs without scikit-image.
    from .demo_scenes import build
    parser = build_parser(
        'Build the COCO-format detection and ADE20K-format segmentation '
        'demo datasets from Fashion-MNIST and scikit-image pictures.',
        osp.join('data', 'demo_scenes'))
    for option, split, default in (('--num-train', 'training', 300),
                                   ('--num-val', 'validation', 100)):
        parser.add_argument(
            option,
            type=int,
            default=default,
            help=f'{split} scenes of each dataset (default: {default})')
    parser.add_argument(
        '--seed', type=int, default=0, help='random seed (default: 0)')
    args = parser.parse_args(argv)
    try:
        summary = build(args.out_dir, args.num_train, args.num_val,
                        args.seed, args.src)
    except FileNotFoundError as error:
        return fail(error)
    if summary is None:
        print(f'Demo scenes already complete in {args.out_dir}')
        return 0
    print(f'Demo scenes written to {args.out_dir}:')
    for split in ('train', 'val'):
        num_images, num_objects = summary[f'coco_{split}']
        print(f'  coco/{split}: {num_images} images, {num_objects} objects; '
              f'ade/{split}: {summary[f"ade_{split}"]} images')
    return 0
