"""One rank of ``test_hub_dist.py``: loads ``mmtnt://NAME`` on a cold cache
and saves its logits.

Rank 0 loads through the model's ``init_cfg`` (``Pretrained``), the other
ranks through mmengine's ``load_checkpoint``, as ``load_from``,
``tools/test.py`` and ``get_model`` do. The ranks start loading together,
after a barrier.

Usage:
    python -m torch.distributed.run --nproc-per-node 2 hub_dist_rank.py \
        INDEX.json IMAGES.pth OUT_DIR

``INDEX.json`` holds the model index entries to add (those of the test's
server), ``IMAGES.pth`` the input batch; each rank writes
``OUT_DIR/rank{RANK}.pth``.
"""
import json
import sys

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope
from mmengine.runner import load_checkpoint

from mmtnt import hub


def build(config, init_cfg=None):
    """The model of a config, with ``init_cfg`` when given."""
    cfg = Config.fromfile(config)
    if init_cfg is not None:
        cfg.model.init_cfg = init_cfg
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        return MODELS.build(cfg.model)


def main(index_file, images_file, out_dir):
    dist.init_process_group('gloo')
    rank = dist.get_rank()
    with open(index_file) as f:
        added = json.load(f)
    index = dict(hub.model_index(), **added)
    hub.index.model_index = lambda: index
    (name, entry), = added.items()
    checkpoint = f'{hub.SCHEME}{name}'
    init_cfg = dict(type='Pretrained', checkpoint=checkpoint)
    model = build(entry['config'], init_cfg if rank == 0 else None)
    dist.barrier()
    if rank == 0:
        model.init_weights()
    else:
        load_checkpoint(model, checkpoint, strict=True)
    with torch.no_grad():
        logits = model.eval()(torch.load(images_file), mode='tensor')
    torch.save(logits, f'{out_dir}/rank{rank}.pth')
    dist.barrier()
    dist.destroy_process_group()


if __name__ == '__main__':
    main(*sys.argv[1:])
