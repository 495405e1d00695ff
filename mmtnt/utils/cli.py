"""The options that several of mmtnt's command lines share."""
from mmengine.config import Config, DictAction


def add_cfg_options(parser, example=None):
    """Add ``--cfg-options KEY=VALUE ...``: settings that override those of
    the config.

    Args:
        parser (argparse.ArgumentParser): The tool's parser; changed in
            place.
        example (str, optional): Key=value pairs for the help, e.g.
            ``'train_cfg.max_epochs=1'``.

    Examples:
        >>> parser = argparse.ArgumentParser()
        >>> add_cfg_options(parser)
        >>> parser.parse_args(['--cfg-options', 'model.head.topk=1'])
        Namespace(cfg_options={'model.head.topk': 1})
    """
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, as key=value pairs' +
        (f'; e.g. {example}' if example else ''))


def load_config(path, cfg_options=None):
    """Read a config and merge ``--cfg-options`` into it.

    Args:
        path (str): The config file.
        cfg_options (dict, optional): The parsed ``--cfg-options``.

    Returns:
        Config: The config.
    """
    cfg = Config.fromfile(path)
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    return cfg
