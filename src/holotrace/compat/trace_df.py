"""HTA's helpers over trace frames (``hta.common.trace_df``) and its constants (``hta.common.constants``)."""

from __future__ import annotations

import pandas as pd

__all__ = [
    "CUDA_MAX_LAUNCH_QUEUE_PER_STREAM",
    "MAX_EVENT_DURATION_US",
    "get_iterations",
    "find_op_occurrence",
    "find_events_by_name_patterns_using_symbol_table",
    "find_events_by_name_patterns_using_decoded_names",
]

CUDA_MAX_LAUNCH_QUEUE_PER_STREAM: int = 1024  # HTA's default "full queue" length
MAX_EVENT_DURATION_US: int = 604_800_000_000  # 7 days


def get_iterations(df: pd.DataFrame) -> list[int]:
    """The iteration numbers of a frame, ascending, without −1 (``TypeError`` without an integer column)."""
    if "iteration" not in df.columns:
        raise TypeError("The input DataFrame doesn't contain the `iteration` column.")
    if df.dtypes["iteration"].kind != "i":
        raise TypeError("The data type of `iteration` column in the input DataFrame is not integer.")
    return [int(i) for i in sorted(df["iteration"].unique()) if i != -1]


def find_op_occurrence(
    df: pd.DataFrame, op_name: str, position: int, name_column: str = "s_name"
) -> tuple[bool, pd.Series]:
    """``(True, row)`` of the ``position``-th row (by ``ts``; negative: from the end) named ``op_name``, else
    ``(False, empty Series)``."""
    if df.empty or "ts" not in df.columns or name_column not in df.columns:
        return False, pd.Series(dtype=object)
    ops = df.loc[df[name_column].eq(op_name)].sort_values("ts", kind="stable")
    pos = position if position >= 0 else len(ops) + position
    if 0 <= pos < len(ops):
        return True, ops.iloc[pos]
    return False, pd.Series(dtype=object)


def find_events_by_name_patterns_using_symbol_table(
    df: pd.DataFrame, list_name_patterns: list[str], symbol_table
) -> pd.Series:
    """``index`` of the rows whose name id is a symbol matching (``re.match``) any of the patterns."""
    names = pd.Series(list(symbol_table.get_sym_id_map()))
    ids = pd.Series(list(symbol_table.get_sym_id_map().values()))
    hit = pd.Series(False, index=names.index)
    for pattern in list_name_patterns:
        hit |= names.str.match(pattern)
    return df.loc[df["name"].isin(ids[hit])]["index"]


def find_events_by_name_patterns_using_decoded_names(
    df: pd.DataFrame, list_name_patterns: list[str], name_column: str = "s_name"
) -> pd.Series:
    """``index`` of the rows whose ``name_column`` text matches (``re.match``) any of the patterns."""
    hit = pd.Series(False, index=df.index)
    for pattern in list_name_patterns:
        hit |= df[name_column].str.match(pattern).fillna(False).astype(bool)
    return df.loc[hit, "index"]
