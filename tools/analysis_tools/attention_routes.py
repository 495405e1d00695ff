"""Time the two attention routes of mmtnt's plain model on the attention
shapes of real models, to check the route rule of
``mmtnt.models.layers.attention`` (``takes_explicit_route``).

The shapes are recorded from one forward pass of each variant; each is
timed, forward plus backward in a 16-bit dtype, by ``explicit``, ``sdpa``
and (on a GPU) ``sdpa-no-flash``; ``--sweep-keys`` adds self-attention
over windows of those many keys. The method is described in
:mod:`mmtnt.analysis.attention_routes`, which this command line runs.

Examples:
    python tools/analysis_tools/attention_routes.py tnt-s svt-s --device cuda
    python tools/analysis_tools/attention_routes.py --device cuda \\
        --sweep-keys 16 25 49 64 100 --sweep-head-dims 32 64
    python tools/analysis_tools/attention_routes.py svt-s --device cpu \\
        --batch-size 1 --img-size 64 --rounds 2
"""
from mmtnt.analysis.attention_routes import main

if __name__ == '__main__':
    main()
