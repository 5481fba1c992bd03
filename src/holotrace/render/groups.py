"""Rows of a table column grouped by value, for the plots that read tables without pandas."""

from __future__ import annotations

import numpy as np

from holotrace.analysis import grouped

__all__ = ["first_seen", "pivot_sum", "rows_by", "texts"]


def texts(a) -> list[str]:
    """Each value as text (a frame column's ``astype(str)``)."""
    return [str(x) for x in a.tolist()]


def rows_by(keys: np.ndarray, *, sort: bool) -> list[tuple[object, np.ndarray]]:
    """``(key, rows)`` per distinct key (as a frame's ``groupby``: sorted keys, or in order of first appearance),
    each group's rows in order."""
    codes, uniq = grouped.factorize(keys)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    groups = [(uniq[i], order[bounds[i] : bounds[i + 1]]) for i in range(len(uniq))]
    return sorted(groups, key=lambda g: g[0]) if sort else groups


def first_seen(values: np.ndarray) -> tuple[np.ndarray, list]:
    """Codes in order of first appearance and the distinct values (``pd.factorize`` of a column of text)."""
    values = values.tolist()
    uniq = list(dict.fromkeys(values))
    code = {v: i for i, v in enumerate(uniq)}
    return np.fromiter(map(code.__getitem__, values), dtype=np.intp, count=len(values)), uniq


def pivot_sum(index, columns, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A frame's ``pivot_table(index=, columns=, values=, aggfunc="sum", fill_value=0.0)`` without pandas: the
    sorted distinct ``index`` and ``columns`` values and the sums (one row per index value), each summed in row
    order as pandas sums a group (:func:`holotrace.analysis.grouped.group_sum`)."""
    rows, rc = np.unique(index, return_inverse=True)
    cols, cc = np.unique(np.asarray(columns, dtype=object), return_inverse=True)
    n = len(cols)
    codes = rc.reshape(-1) * n + cc.reshape(-1)
    sums = grouped.group_sum(codes, np.asarray(values, dtype=np.float64), len(rows) * n)
    return rows, cols, sums.reshape(len(rows), n)
