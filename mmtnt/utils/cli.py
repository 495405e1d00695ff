"""The options that several of mmtnt's command lines share."""
from mmengine.config import Config, DictAction


def add_cfg_options(parser, example=None):
    """Add ``--cfg-options KEY=VALUE ...`` to ``parser``, with ``example``
    (e.g. ``'train_cfg.max_epochs=1'``) in its help."""
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, as key=value pairs' +
        (f'; e.g. {example}' if example else ''))


def load_config(path, cfg_options=None):
    """Read a config file and merge ``--cfg-options`` into it.

    The tools' one config reader; ``engine.runner_config.load_config``
    merges the tool's own options before ``--cfg-options``.

    Args:
        path (str): The config file.
        cfg_options (dict, optional): The parsed ``--cfg-options``.
    """
    cfg = Config.fromfile(path)
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    return cfg
