"""The hub tests' local weights server and patched model index
(tests/hub_server.py)."""
from hub_server import model_index, weights_server  # noqa: F401
