"""Count the parameters and FLOPs of the model of any config of the repo.

The config's ``default_scope`` decides the task and the forward counted
(classifier logits on the test crop, a detector's ``'tensor'`` forward on
800x1280, a segmentor's on 512x512); ``--shape H [W]`` overrides the input
size. The counter is mmengine's ``FlopAnalyzer`` with a rule for
``scaled_dot_product_attention`` added, so its "FLOPs" are MACs with the
attention products included (:mod:`mmtnt.analysis.flops`; this command
line runs :func:`mmtnt.analysis.cli.get_flops`).

Examples:
    python tools/analysis_tools/get_flops.py \\
        configs/tnt/tnt-s-p16_16xb64_in1k.py
    python tools/analysis_tools/get_flops.py \\
        configs/twins/upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py \\
        --shape 512 1024
    python tools/analysis_tools/get_flops.py \\
        configs/pyramid_tnt/pyramid-tnt-s_8xb128_in1k-256px.py --per-module 3
    python tools/analysis_tools/get_flops.py --table
    python tools/analysis_tools/get_flops.py --table \\
        --write-doc docs/model_complexity.md

``--table`` counts the ImageNet classifiers of the model index at their
published input sizes and prints a Markdown table next to the papers'
figures; ``--write-doc`` puts it into a file, between the lines
``<!-- get_flops.py --table: begin -->`` and ``... end -->``.
"""
from mmtnt.analysis.cli import get_flops as main

if __name__ == '__main__':
    main()
