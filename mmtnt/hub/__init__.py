"""Published weights by name: ``mmtnt://NAME[@SOURCE]`` works wherever
mmengine loads a checkpoint. On first use the file is downloaded (from
``$MMTNT_WEIGHTS_MIRROR/HOST/PATH`` when set), checked, converted and cached
under ``$MMTNT_HOME/checkpoints``; any failure is one :class:`HubError`.
"""
from .cache import (CONVERTER_VERSION, cache_dir, cache_file,
                    fetch_checkpoint)
from .download import announced_sha256, download_url, manual_steps
from .index import (FAMILIES, SCHEME, HubError, find_model, index_file,
                    model_index, resolve)
from .scheme import load_from_mmtnt, prepare_checkpoint, register_hub_scheme

__all__ = [
    'CONVERTER_VERSION', 'FAMILIES', 'SCHEME', 'HubError',
    'announced_sha256', 'cache_dir', 'cache_file', 'download_url',
    'fetch_checkpoint', 'find_model', 'index_file', 'load_from_mmtnt',
    'manual_steps', 'model_index', 'prepare_checkpoint',
    'register_hub_scheme', 'resolve'
]
