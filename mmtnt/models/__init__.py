from .backbones import *  # noqa: F401,F403
from .layers import ATTENTION_IMPLS, set_attention_impl  # noqa: F401
from .necks import *  # noqa: F401,F403
from .utils import RESIZE_IMPLS, set_resize_impl  # noqa: F401
