"""The markdown tables of the analysis tools and their cells."""
import statistics


def format_table(header, rows):
    """A markdown table.

    Args:
        header (list[str]): The column titles.
        rows (list[list[str]]): The cells of each row.

    Returns:
        str: The table, one line per row.

    Examples:
        >>> print(format_table(['model', 'ms'], [['svt-s', '12']]))
        | model | ms |
        |---|---|
        | svt-s | 12 |
    """
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
    return '\n'.join(lines)


def markdown_table(rows, columns):
    """A markdown table of rows given by key (missing cells as '-').

    Args:
        rows (list[dict]): Cells by key.
        columns (list[tuple[str, str]]): ``(key, title)`` of each column.

    Returns:
        str: The table, one line per row.

    Examples:
        >>> print(markdown_table([dict(config='svt-s')],
        ...                      [('config', 'config'), ('onnx', 'ms')]))
        | config | ms |
        |---|---|
        | svt-s | - |
    """
    return format_table([title for _, title in columns],
                        [[str(row.get(key, '-')) for key, _ in columns]
                         for row in rows])


def ratio_cell(values, reference, peer_over_own):
    """The per-round ratios of two measurements taken in the same rounds:
    their median and, over several rounds, their range.

    Args:
        values (list[float]): A peer's value of each round.
        reference (list[float]): The own value of the same rounds.
        peer_over_own (bool): ``values / reference`` (times: above 1 means
            the own is faster), else ``reference / values`` (memory: below
            1 means the own needs less).

    Returns:
        str: ``'1.23'`` for one round, else ``'median (lowest-highest)'``.

    Examples:
        >>> ratio_cell([2., 3., 4.], [1., 2., 2.], peer_over_own=True)
        '2.00 (1.50-2.00)'
    """
    ratios = [
        peer / own if peer_over_own else own / peer
        for peer, own in zip(values, reference)
    ]
    if len(ratios) == 1:
        return f'{ratios[0]:.2f}'
    return (f'{statistics.median(ratios):.2f} '
            f'({min(ratios):.2f}-{max(ratios):.2f})')


def format_times(seconds):
    """``median (fastest-slowest)`` in milliseconds.

    Args:
        seconds (list[float]): The times of the runs.

    Returns:
        str: Whole milliseconds.

    Examples:
        >>> format_times([0.012, 0.010, 0.015])
        '12 (10-15)'
    """
    ms = [s * 1e3 for s in seconds]
    return (f'{statistics.median(ms):.0f} '
            f'({min(ms):.0f}-{max(ms):.0f})')
