"""The markdown table writer of mmtnt's analysis and of the benchmarks."""


def format_table(columns, rows):
    """A markdown table.

    Args:
        columns (list[str | tuple[str, str]]): The column titles, or
            ``(key, title)`` pairs for rows given as dicts.
        rows (list[list[str] | dict]): The cells of each row: in column
            order, or by key (a missing cell is ``'-'``).

    Examples:
        >>> print(format_table([('config', 'config'), ('onnx', 'ms')],
        ...                    [dict(config='svt-s')]))
        | config | ms |
        |---|---|
        | svt-s | - |
    """
    keys = [c[0] if isinstance(c, tuple) else i for i, c in enumerate(columns)]
    titles = [c[1] if isinstance(c, tuple) else c for c in columns]
    lines = ['| ' + ' | '.join(titles) + ' |', '|' + '---|' * len(titles)]
    for row in rows:
        cells = [
            str(row.get(key, '-')) if isinstance(row, dict) else row[key]
            for key in keys
        ]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)
