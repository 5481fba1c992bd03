"""Comparing result tables and pandas frames in tests: values and numeric types exactly, text as text."""

from __future__ import annotations

import pandas as pd

from holotrace.table import Table


def as_frame(x) -> pd.DataFrame:
    """A pandas frame of ``x`` (a :class:`~holotrace.table.Table` or a frame) with text columns as ``object``."""
    df = x.to_pandas() if isinstance(x, Table) else x.copy()
    for c in df.columns:
        if df[c].dtype == object or isinstance(df[c].dtype, pd.StringDtype):
            df[c] = pd.Series(df[c].to_numpy(dtype=object), index=df.index, dtype=object)
    return df


def assert_frames_equal(left, right, **kw) -> None:
    """``pd.testing.assert_frame_equal`` of two tables or frames; pandas' ``str`` and ``object`` text are alike."""
    pd.testing.assert_frame_equal(as_frame(left), as_frame(right), **kw)


def is_table(x) -> bool:
    return isinstance(x, (Table, pd.DataFrame))
