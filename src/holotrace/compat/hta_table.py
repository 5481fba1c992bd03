"""HTA's per-rank table (``TraceAnalysis.t.traces[rank]`` after loading), built from HTA's view.

The facade returns rows of this table where HTA does (e.g. ``get_gpu_kernels_with_user_annotations``);
analyses never read it. Columns, in HTA's order: ``index, cat, name, pid, tid, ts, dur``, HTA's arg columns
(:data:`ARG_COLUMNS`), ``index_correlation, iteration, end, s_name, s_cat``. ``name``/``cat`` are ids into
``job.strings`` with the text in ``s_name``/``s_cat``; the DataFrame index is the event ``index``.
Text columns are gathered by pyarrow from the job's string table (no Python string per row).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from holotrace.model.view import RankView

__all__ = ["ARG_COLUMNS", "hta_table", "text_column"]

# HTA's default arg columns, in HTA's order
ARG_COLUMNS = (
    "stream",
    "correlation",
    "bytes",
    "memory_bw_gbps",
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
    "input_dims",
    "input_type",
    "input_strides",
    "external_id",
    "python_id",
    "python_parent_id",
    "collective_name",
    "in_msg_nelems",
    "out_msg_nelems",
    "msg_dtype",
    "group_size",
    "process_rank",
    "in_split_size",
    "out_split_size",
)
# text args, with the value HTA writes where the arg is absent
_TEXT_DEFAULTS = {
    "input_dims": "-1",
    "input_type": "-1",
    "input_strides": "-1",
    "in_split_size": "[]",
    "out_split_size": "[]",
    "collective_name": "",
    "msg_dtype": "",
}
_VIEW_ARGS = ("stream", "correlation")


def hta_table(view: RankView, strings, *, args: bool = True, rows=None) -> pd.DataFrame:
    """HTA's table of one rank from its HTA view; ``args=False`` leaves out the arg columns but
    ``stream`` and ``correlation``; ``rows`` (positions in the view) builds only those rows, in that order."""
    pick = (lambda a: a.copy()) if rows is None else (lambda a: a[rows])  # noqa: E731  (never the view's memory)
    model_rows = view["row"] if rows is None else view["row"][rows]
    data = {c: pick(view[c]) for c in ("index", "cat", "name", "pid", "tid", "ts", "dur")}
    for col in ARG_COLUMNS:
        if col in _VIEW_ARGS:
            data[col] = pick(view[col])
        elif not args:
            continue
        elif col in _TEXT_DEFAULTS:
            data[col] = text_column(strings, view.model[col][model_rows], _TEXT_DEFAULTS[col])
        else:
            v = view.model[col][model_rows]
            data[col] = v.astype(np.float64 if v.dtype.kind == "f" else np.int64)
    for col in ("index_correlation", "iteration", "end"):
        data[col] = pick(view[col])
    data["s_name"] = text_column(strings, data["name"])
    data["s_cat"] = text_column(strings, data["cat"])
    return pd.DataFrame(data, index=np.asarray(data["index"]), copy=False)


def text_column(strings, ids: np.ndarray, empty: str = ""):
    """Decode string ids (−1 → ``empty``) into the array pandas uses for text by default.

    With pandas' pyarrow-backed ``str`` dtype, the values are gathered by pyarrow from the job's table
    without creating a Python string per row; otherwise an object array.
    """
    ids = np.asarray(ids)
    dtype = _default_text_dtype()
    if dtype is None:
        return strings.decode(ids, empty=empty)
    import pyarrow as pa

    table = strings.arrow(empty)
    pos = ids.astype(np.int64)  # widen first: small id dtypes cannot hold the table's length
    pos[pos < 0] = len(table) - 1
    return pd.arrays.ArrowStringArray(table.take(pa.array(pos)), dtype=dtype)


def _default_text_dtype():
    """pandas' default text dtype when it is the pyarrow-backed ``str``, else None (object arrays)."""
    dtype = pd.Series([""]).dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        return dtype
    return None
