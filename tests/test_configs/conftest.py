import pytest


@pytest.fixture(scope='session', autouse=True)
def read_metafiles_once():
    """Read the metafiles of mmdet/mmseg/mmpretrain once per session.

    For each `mmdet::`/`mmseg::` base of a config, mmengine first looks the
    name up among the model names of every metafile of the package (some
    200 YAML files, about a second per config) before taking it as a
    path. The files do not change during the tests, and mmengine only reads
    what it loads, so the parsed files are kept.
    """
    from mmengine.config import utils
    original = utils.load
    cache = {}

    def load(file, *args, **kwargs):
        if args or kwargs or not isinstance(file, str) or '.mim' not in file:
            return original(file, *args, **kwargs)
        if file not in cache:
            cache[file] = original(file)
        return cache[file]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(utils, 'load', load)
        yield
