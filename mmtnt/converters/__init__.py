from .common import extract_state_dict, load_checkpoint_file
from .pyramid_tnt import convert_pyramid_tnt  # noqa: F401
from .tnt import convert_tnt, detect_tnt_format, detect_tnt_layout
from .twins import convert_twins, detect_twins_format  # noqa: F401

__all__ = [
    'convert_tnt', 'detect_tnt_format', 'detect_tnt_layout',
    'extract_state_dict', 'load_checkpoint_file'
]
