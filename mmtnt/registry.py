"""mmtnt's registries: children of mmengine's root registries.

A config names mmtnt's modules with the ``mmtnt.`` prefix, e.g.
``dict(type='mmtnt.TNT')``, whatever its ``default_scope`` (mmpretrain, mmdet
or mmseg). mmengine then imports this file on its own, and the ``locations``
below import the modules that register themselves, so no import by hand
(``custom_imports``) is needed.
"""
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import \
    OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import PARAM_SCHEDULERS as MMENGINE_PARAM_SCHEDULERS
from mmengine.registry import Registry

MODELS = Registry('model', parent=MMENGINE_MODELS, locations=['mmtnt.models'])
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, locations=['mmtnt.engine'])
OPTIM_WRAPPERS = Registry(
    'optim_wrapper',
    parent=MMENGINE_OPTIM_WRAPPERS,
    locations=['mmtnt.engine'])
OPTIM_WRAPPER_CONSTRUCTORS = Registry(
    'optimizer wrapper constructor',
    parent=MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS,
    locations=['mmtnt.engine'])
PARAM_SCHEDULERS = Registry(
    'parameter scheduler',
    parent=MMENGINE_PARAM_SCHEDULERS,
    locations=['mmtnt.engine'])
