"""The command line of ``tools/visualization/vis_cam.py``."""
import argparse
import os.path as osp

import mmcv

from ..utils.cli import add_cfg_options, load_config
from .cam import (METHODS, blend_cam, build_classifier, compute_cam,
                  load_image)
from .target_layers import (default_target_layers, layer_expression,
                            layer_name, resolve_layer)


def parse_args(argv=None):
    """Parse the command line of ``vis_cam.py``."""
    parser = argparse.ArgumentParser(
        description='Draw the class activation map of an mmtnt classifier '
        'on an image.')
    parser.add_argument('img', help='the image file')
    parser.add_argument('config', help='the classifier config')
    parser.add_argument('checkpoint', help='the checkpoint')
    parser.add_argument(
        '--target-layers',
        nargs='+',
        default=[],
        help='layers whose outputs make the CAM, as Python expressions '
        'relative to the model, e.g. "backbone.stages[-1].blocks[-1].norm1" '
        '(several are averaged); default: chosen from the backbone type')
    parser.add_argument(
        '--method',
        default='gradcam',
        help=f'the CAM method, one of {", ".join(METHODS)} '
        '(case-insensitive)')
    parser.add_argument(
        '--target-category',
        nargs='+',
        type=int,
        default=[],
        help='class indices to explain, one map each; default: the '
        'predicted class')
    parser.add_argument(
        '--eigen-smooth',
        action='store_true',
        help='keep the first principal component of the weighted outputs '
        '(less noise)')
    parser.add_argument(
        '--aug-smooth',
        action='store_true',
        help='average the maps of flipped and rescaled-intensity copies of '
        'the image')
    parser.add_argument(
        '--save-path',
        help='the PNG to write; with several categories, NAME_<category>.png '
        'per category. Without it the picture is shown in a window')
    parser.add_argument(
        '--device', default='cpu', help='e.g. cpu or cuda:0 (default: cpu)')
    parser.add_argument(
        '--preview-model',
        action='store_true',
        help='print the names of the layers that may be targeted and exit')
    add_cfg_options(parser)
    args = parser.parse_args(argv)
    if args.method.lower() not in METHODS:
        parser.error(f'unknown --method {args.method!r}: choose one of '
                     f'{", ".join(METHODS)}.')
    return args


def output_paths(save_path, categories):
    """A path (None: shown) per category: ``save_path`` for one category,
    ``NAME_<category>.EXT`` for several."""
    if save_path is None:
        return [None] * len(categories)
    if len(categories) == 1:
        return [save_path]
    stem, ext = osp.splitext(save_path)
    return [f'{stem}_{c}{ext or ".png"}' for c in categories]


def main(argv=None):
    """Draw the CAM of each target category of an image and save (or show)
    it; ``SystemExit`` with ``Error: ...`` for what does not suit the
    model."""
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    try:
        model = build_classifier(cfg, args.checkpoint, args.device)
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f'Error: {error}')
    if args.preview_model:
        for name, _ in model.named_modules():
            if name:
                print(layer_expression(name))
        return
    try:
        inputs, image = load_image(args.img, cfg, model)
        layers = args.target_layers or default_target_layers(model)
        modules = [resolve_layer(model, layer) for layer in layers]
        print('Target layers: ' +
              ', '.join(layer_name(model, m) for m in modules))
        cams, categories, scores = compute_cam(
            model,
            inputs,
            modules,
            method=args.method,
            categories=args.target_category,
            eigen_smooth=args.eigen_smooth,
            aug_smooth=args.aug_smooth)
    except ValueError as error:
        raise SystemExit(f'Error: {error}')
    classes = getattr(model, '_dataset_meta', {}).get('classes')
    for cam, category, score, path in zip(
            cams, categories, scores, output_paths(args.save_path,
                                                   categories)):
        name = f' ({classes[category]})' if classes else ''
        print(f'Target category: {category}{name}, score {score:.4f}')
        if cam.max() - cam.min() < 1e-6:
            print(f'Warning: the CAM of category {category} is flat: the '
                  'target layers do not change its score (e.g. tokens after '
                  'the last attention of a class-token model); choose '
                  'earlier ones with --target-layers.')
        drawn = blend_cam(image, cam)
        if path is None:
            mmcv.imshow(drawn, win_name=f'{args.method} {category}')
        else:
            mmcv.imwrite(drawn, path)
            print(f'Saved the CAM to {path}')
