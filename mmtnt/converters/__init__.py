from .common import extract_state_dict, load_checkpoint_file
from .pyramid_tnt import convert_pyramid_tnt
from .tnt import convert_tnt, detect_tnt_format, detect_tnt_layout
from .twins import convert_twins, detect_twins_format

__all__ = [
    'convert_pyramid_tnt', 'convert_tnt', 'convert_twins',
    'detect_tnt_format', 'detect_tnt_layout', 'detect_twins_format',
    'extract_state_dict', 'load_checkpoint_file'
]
