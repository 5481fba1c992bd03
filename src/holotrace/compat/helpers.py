"""HTA's free helper functions that notebooks and tests call (``hta.common.trace``, ``hta.utils.utils``,
``hta.common.trace_symbol_table``, ``hta.analyzers.critical_path_analysis``), on holotrace's loader.

``parse_trace_file`` returns what HTA's parser returns for one file: ``(metadata, frame, symbol table)``, the
frame being HTA's parsed table (absolute times, file order, ``index_correlation``, ``iteration``, ``end``),
built from holotrace's one decoder.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from functools import wraps
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "get_cpu_gpu_correlation",
    "decode_symbol_id_to_symbol_name",
    "trace_event_timestamp_to_unixtime_ns",
    "parse_trace_file",
    "normalize_path",
    "get_mp_pool_size",
    "get_value_from_dict",
    "timeit",
    "PROFILE_TIMES",
]

PROFILE_TIMES: dict = {}


def get_cpu_gpu_correlation(df: pd.DataFrame) -> pd.DataFrame:
    """``gpu_index, cpu_index``: each GPU row (``stream > 0``) and the launch its ``index_correlation`` names."""
    k = df[df["stream"].gt(0) & df["index_correlation"].gt(0)]
    return pd.DataFrame({"gpu_index": k["index"].to_numpy(), "cpu_index": k["index_correlation"].to_numpy()})


def decode_symbol_id_to_symbol_name(df: pd.DataFrame, symbol_table, use_shorten_name: bool) -> None:
    """Write ``s_name``/``s_cat`` (and ``s_user_annotation``) from integer id columns, in place (−1 → ``""``)."""
    from holotrace.text import hta_short_names as shorten_names

    table = np.asarray(list(symbol_table.sym_table) + [""], dtype=object)
    if use_shorten_name:
        table = np.asarray(shorten_names(table), dtype=object)
    for col, out in (("name", "s_name"), ("cat", "s_cat"), ("user_annotation", "s_user_annotation")):
        if col in df.columns and df[col].dtype.kind == "i":
            ids = df[col].to_numpy()
            df[out] = table[np.where((ids >= 0) & (ids < len(table) - 1), ids, len(table) - 1)]


def trace_event_timestamp_to_unixtime_ns(trace_event_ts_us: float, trace_metadata: dict) -> int:
    """Unix time (ns) of a trace timestamp (µs), from the trace's ``baseTimeNanoseconds`` (``KeyError`` without)."""
    base = trace_metadata.get("baseTimeNanoseconds")
    if base is None:
        raise KeyError(
            "'baseTimeNanoseconds' is not found in the trace metadata. Unable to convert trace event "
            "timestamp to unix time."
        )
    return int(trace_event_ts_us * 1e3) + int(base)


def parse_trace_file(trace_file_path: str, cfg=None):
    """``(metadata, frame, symbol table)`` of one trace file, as HTA's parser leaves them (see the module)."""
    from holotrace.compat.trace import Trace

    path = str(trace_file_path)
    if not (path.endswith(".gz") or path.endswith(".json")):
        raise ValueError(f"expect the value of trace_file ({path}) ends with '.gz' or 'json'")
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    t = Trace(trace_files=[path], trace_dir=str(Path(path).parent), parser_config=cfg)
    t.parse_traces()
    rank = t.get_ranks()[0] if t.get_ranks() else None
    if rank is None:
        return {}, pd.DataFrame(), t.symbol_table
    return t.meta_data[rank], t.traces[rank], t.symbol_table


def normalize_path(path: str) -> str:
    """HTA's path rule: ``./x`` and ``~/x`` become absolute; other paths are kept."""
    if path.startswith("./"):
        rest = path[2:]
        return str(Path.cwd().joinpath(rest)) if rest else str(Path.cwd())
    if path.startswith("~/"):
        return str(Path.home().joinpath(path[2:]))
    return path


def get_mp_pool_size(obj_size: int, num_objs: int) -> int:
    """Processes for ``num_objs`` objects of ``obj_size`` bytes: within 80% of free memory and the cores."""
    try:
        import psutil

        free = psutil.virtual_memory().available
    except ImportError:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(1, min(int(0.8 * free / max(obj_size, 1)), num_objs, mp.cpu_count()))


def get_value_from_dict(d: object, key: str, default: object = None) -> object:
    """``d["a"]["b"]["c"]`` for ``key="a.b.c"``, or ``default``."""
    for k in key.split("."):
        if isinstance(d, dict) and k in d:
            d = d[k]
        else:
            return default
    return d


def timeit(func):
    """Record the wall time of each call of ``func`` in :data:`PROFILE_TIMES` (HTA's decorator)."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            PROFILE_TIMES[func.__name__] = time.perf_counter() - start

    return wrapper
