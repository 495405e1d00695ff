from .common import extract_state_dict, load_checkpoint_file
from .tnt import convert_tnt, detect_tnt_format, detect_tnt_layout

__all__ = [
    'convert_tnt', 'detect_tnt_format', 'detect_tnt_layout',
    'extract_state_dict', 'load_checkpoint_file'
]
