"""Predict on images with an mmtnt model, print and draw the predictions.

The config's ``default_scope`` picks the task: mmpretrain's
``ImageClassificationInferencer`` (top-k classes), mmdet's ``DetInferencer``
(boxes, and masks for instance segmentation) or mmseg's ``MMSegInferencer``
(the label map blended over the image).

For each image, ``OUT_DIR/vis/<name>.png`` is the drawn picture and
``OUT_DIR/preds/<name>.json`` the printed prediction; a segmentor also
writes its label map to ``OUT_DIR/preds/<name>.png``.

Examples:
    python demo/image_demo.py shirt.png \
        configs/demo/tnt-demo_1xb128_fashion-mnist.py \
        work_dirs/demo/epoch_4.pth
    python demo/image_demo.py data/demo_scenes/coco/val \
        configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py \
        CHECKPOINT --out-dir outputs/mask-rcnn --score-thr 0.5
"""
import argparse
import os
import os.path as osp
import tempfile

import mmcv
import mmengine
import numpy as np
import torch

from mmtnt.apis import build_inferencer
from mmtnt.apis.model import SCOPE_TASKS
from mmtnt.utils.cli import add_cfg_options, load_config

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Predict on an image or a folder of images with an '
        'mmtnt classifier, detector or segmentor.')
    parser.add_argument('image', help='an image file or a folder of images')
    parser.add_argument('config', help='the model config')
    parser.add_argument('checkpoint', help='the checkpoint')
    parser.add_argument(
        '--device',
        default=None,
        help='e.g. cpu or cuda:0 (default: the first GPU when there is one, '
        'else the CPU)')
    parser.add_argument(
        '--out-dir',
        default='outputs',
        help='where the pictures (vis/) and predictions (preds/) go')
    parser.add_argument(
        '--topk', type=int, default=5, help='classes printed per image')
    parser.add_argument(
        '--score-thr',
        type=float,
        default=0.3,
        help='lowest score of a printed and drawn detection')
    parser.add_argument(
        '--opacity',
        type=float,
        default=0.5,
        help='opacity of the label map drawn over the image')
    parser.add_argument(
        '--batch-size', type=int, default=1, help='images per forward pass')
    parser.add_argument(
        '--no-cpu-accel',
        action='store_true',
        help='run the plain model on the CPU, without mmtnt.accel')
    add_cfg_options(parser)
    return parser.parse_args(argv)


def list_images(path):
    """The image files at ``path``: the file itself or a folder's images.

    Args:
        path (str): An image file or a folder.

    Returns:
        list[str]: Image paths, sorted.
    """
    if osp.isdir(path):
        images = sorted(
            osp.join(path, name) for name in os.listdir(path)
            if name.lower().endswith(IMAGE_SUFFIXES))
        if not images:
            raise FileNotFoundError(
                f'{path} holds no images ({", ".join(IMAGE_SUFFIXES)}).')
        return images
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path} is neither an image nor a folder.')
    return [path]


def predict(inferencer, task, images, batch_size):
    """Run the Inferencer (with its progress bar); one data sample per
    image."""
    result = inferencer(images, return_datasamples=True, batch_size=batch_size)
    if task == 'mmdet':
        result = result['predictions']
    # mmseg's Inferencer unwraps a single prediction
    return result if isinstance(result, list) else [result]


def draw(inferencer, task, image, prediction, args):
    """Draw one prediction over its image; returns an RGB array."""
    if task == 'mmpretrain':
        # mmpretrain's Inferencer draws only into a folder or a window
        with tempfile.TemporaryDirectory() as tmp:
            return inferencer.visualize([image], [prediction], show_dir=tmp)[0]
    if task == 'mmdet':
        return inferencer.visualize([image], [prediction],
                                    return_vis=True,
                                    no_save_vis=True,
                                    pred_score_thr=args.score_thr)[0]
    return inferencer.visualize([image], [prediction],
                                return_vis=True,
                                opacity=args.opacity)[0]


def summarize_prediction(task, prediction, classes, topk=5, score_thr=0.3):
    """Turn one image's prediction into plain numbers and text.

    Args:
        task (str): ``'mmpretrain'``, ``'mmdet'`` or ``'mmseg'``.
        prediction: What the task's Inferencer returns for the image with
            ``return_datasamples=True``: a ``DataSample``, ``DetDataSample``
            or ``SegDataSample``.
        classes (Sequence[str] | None): Class names, indexed by label.
        topk (int): Classes kept for a classifier. Defaults to 5.
        score_thr (float): Lowest score of a kept detection. Defaults to 0.3.

    Returns:
        dict: ``topk`` (label, class, score) for classification;
        ``instances`` (label, class, score, box ``[x1, y1, x2, y2]`` in
        pixels of the input, and ``mask_area`` for instance masks) for
        detection; ``classes`` (label, class, fraction of the pixels) and
        ``label_map`` (an HxW ``np.ndarray``) for segmentation.
    """

    def name(label):
        return classes[label] if classes is not None else str(label)

    if task == 'mmpretrain':
        scores = prediction.pred_score.float().cpu()
        values, labels = scores.topk(min(topk, scores.numel()))
        return dict(topk=[
            dict(label=int(label), cls=name(int(label)), score=float(value))
            for value, label in zip(values, labels)
        ])
    if task == 'mmdet':
        pred = prediction.pred_instances.cpu()
        keep = pred.scores >= score_thr
        instances = []
        for i in torch.nonzero(keep).flatten().tolist():
            label = int(pred.labels[i])
            instance = dict(
                label=label,
                cls=name(label),
                score=float(pred.scores[i]),
                box=[round(float(v), 1) for v in pred.bboxes[i]])
            if 'masks' in pred:
                instance['mask_area'] = int(pred.masks[i].sum())
            instances.append(instance)
        return dict(instances=instances)
    if task == 'mmseg':
        label_map = prediction.pred_sem_seg.data[0].cpu().numpy()
        labels, counts = np.unique(label_map, return_counts=True)
        order = np.argsort(-counts)
        return dict(
            classes=[
                dict(
                    label=int(labels[i]),
                    cls=name(int(labels[i])),
                    fraction=float(counts[i] / label_map.size))
                for i in order
            ],
            label_map=label_map)
    raise ValueError(
        f'task must be one of {tuple(SCOPE_TASKS)}, got {task!r}.')


def describe(summary):
    """One line per class, detection or segment of a summary."""
    if 'topk' in summary:
        return [f'  {p["cls"]}: {p["score"]:.4f}' for p in summary['topk']]
    if 'instances' in summary:
        lines = [f'  {len(summary["instances"])} detections']
        lines += [
            f'  {p["cls"]}: {p["score"]:.3f} at {p["box"]}'
            for p in summary['instances']
        ]
        return lines
    return [
        f'  {p["cls"]}: {100 * p["fraction"]:.1f}% of the pixels'
        for p in summary['classes']
    ]


def main(argv=None):
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    if not osp.isfile(args.checkpoint):
        raise SystemExit(f'Error: checkpoint {args.checkpoint} not found.')
    try:
        images = list_images(args.image)
    except FileNotFoundError as error:
        raise SystemExit(f'Error: {error}')

    # mmtnt's registry scope is imported by the config's types
    inferencer = build_inferencer(
        cfg,
        args.checkpoint,
        device=args.device,
        cpu_accel=not args.no_cpu_accel)
    task = cfg.default_scope
    # the class names the checkpoint was saved with
    if task == 'mmpretrain':
        classes = inferencer.classes
    else:
        classes = inferencer.model.dataset_meta.get('classes')
    predictions = predict(inferencer, task, images, args.batch_size)

    vis_dir = osp.join(args.out_dir, 'vis')
    pred_dir = osp.join(args.out_dir, 'preds')
    mmengine.mkdir_or_exist(vis_dir)
    mmengine.mkdir_or_exist(pred_dir)
    for image, prediction in zip(images, predictions):
        name = osp.splitext(osp.basename(image))[0]
        summary = summarize_prediction(
            task, prediction, classes, topk=args.topk,
            score_thr=args.score_thr)
        label_map = summary.pop('label_map', None)
        if label_map is not None:
            mmcv.imwrite(
                label_map.astype('uint8' if label_map.max() < 256 else
                                 'uint16'), osp.join(pred_dir, name + '.png'))
        mmengine.dump(summary, osp.join(pred_dir, name + '.json'), indent=1)
        picture = draw(inferencer, task, image, prediction, args)
        mmcv.imwrite(picture[..., ::-1], osp.join(vis_dir, name + '.png'))
        print('\n'.join([f'{image}:'] + describe(summary)))
    print(f'Pictures in {vis_dir}, predictions in {pred_dir}.')


if __name__ == '__main__':
    main()
