def resolve_arch(arch, arch_zoo, essential_keys, model_name):
    """A copy of the architecture setting ``arch``: a name from
    ``arch_zoo`` (any case), or a dict with exactly ``essential_keys``;
    ``model_name`` is for error messages.

    Examples:
        >>> zoo = {'s': dict(depth=2), 'small': dict(depth=2)}
        >>> resolve_arch('Small', zoo, {'depth'}, 'Net')
        {'depth': 2}
    """
    if isinstance(arch, str):
        key = arch.lower()
        if key not in arch_zoo:
            raise ValueError(
                f'Unknown {model_name} arch {arch!r}: choose one of '
                f'{sorted(arch_zoo)} or pass a dict with the keys '
                f'{sorted(essential_keys)}.')
        return dict(arch_zoo[key])
    if not isinstance(arch, dict):
        raise TypeError(f'{model_name} arch must be a str or a dict, got '
                        f'{type(arch).__name__}.')
    missing = essential_keys - set(arch)
    unknown = set(arch) - essential_keys
    if missing or unknown:
        raise ValueError(
            f'A custom {model_name} arch needs exactly the keys '
            f'{sorted(essential_keys)}; missing {sorted(missing)}, unknown '
            f'{sorted(unknown)}.')
    return dict(arch)


def normalize_out_indices(out_indices, num_outputs, model_name):
    """``out_indices`` (int or sequence, negative allowed) as a sorted
    tuple in ``range(num_outputs)``, each checked.

    Examples:
        >>> normalize_out_indices([0, -2], 4, 'SVT')
        (0, 2)
    """
    if isinstance(out_indices, int):
        out_indices = [out_indices]
    result = set()
    for index in out_indices:
        if not isinstance(index, int) or not (-num_outputs <= index <
                                              num_outputs):
            raise ValueError(
                f'Invalid out index {index!r} for {model_name}: it has '
                f'{num_outputs} outputs, so indices must be integers in '
                f'[{-num_outputs}, {num_outputs - 1}].')
        result.add(index % num_outputs)
    return tuple(sorted(result))


def check_stage_lists(settings, num_stages, model_name):
    """Raise a ValueError naming every setting in ``settings`` (name ->
    list or tuple) that does not hold one value per stage.

    Examples:
        >>> check_stage_lists(dict(depths=[2, 2], sr_ratios=(2, 1)), 2,
        ...                   'PCPVT')
        >>> check_stage_lists(dict(depths=[2, 2], sr_ratios=[1]), 2, 'PCPVT')
        Traceback (most recent call last):
        ...
        ValueError: PCPVT has 2 stages: every per-stage setting needs 2 values, got sr_ratios=[1].
    """  # noqa: E501
    wrong = {
        key: value
        for key, value in settings.items()
        if not isinstance(value, (list, tuple)) or len(value) != num_stages
    }
    if num_stages < 1 or wrong:
        got = ', '.join(f'{key}={value!r}' for key, value in wrong.items())
        raise ValueError(
            f'{model_name} has {num_stages} stages: every per-stage setting '
            f'needs {num_stages} values, got {got or "no stage"}.')
