"""Which event fields and args holotrace decodes, and into which columns.

This is the one place that names the raw Kineto keys. The decoder builds its
typed records from these tables, and the trace model and the HTA-compatible
view read the resulting columns by the names given here.

Kinds:
  ``int``   int64 column, the default when the key is absent
  ``float`` float64 column
  ``str``   int32 id into the job's string table, -1 when absent
  ``raw``   the raw JSON text of a list/object value, interned like ``str``
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FORMAT_VERSION = 5  # bump whenever decoded columns change: invalidates caches


@dataclass(frozen=True)
class ArgSpec:
    column: str
    raw_key: str
    kind: str  # "int" | "float" | "str" | "raw"
    default: float | int = -1


# Args kept for every event (the HTA default set plus what holotrace's own
# analyses use). Everything else is available with ``all_args=True``.
ARG_SPECS: tuple[ArgSpec, ...] = (
    ArgSpec("stream", "stream", "int"),
    ArgSpec("correlation", "correlation", "int"),
    ArgSpec("external_id", "External id", "int"),
    ArgSpec("external_id_legacy", "external id", "int"),
    ArgSpec("device", "device", "int"),
    ArgSpec("ev_idx", "Ev Idx", "int"),
    ArgSpec("python_id", "Python id", "int"),
    ArgSpec("python_parent_id", "Python parent id", "int"),
    ArgSpec("sequence", "Sequence number", "int"),
    ArgSpec("fwd_thread_id", "Fwd thread id", "int"),
    ArgSpec("bytes", "bytes", "int"),
    ArgSpec("memory_bw_gbps", "memory bandwidth (GB/s)", "float", 0.0),
    ArgSpec("wait_on_stream", "wait_on_stream", "int"),
    ArgSpec("wait_on_cuda_event_record_corr_id", "wait_on_cuda_event_record_corr_id", "int"),
    ArgSpec("cuda_sync_kind", "cuda_sync_kind", "str"),
    ArgSpec("input_dims", "Input Dims", "raw"),
    ArgSpec("input_type", "Input type", "raw"),
    ArgSpec("input_strides", "Input Strides", "raw"),
    ArgSpec("concrete_inputs", "Concrete Inputs", "raw"),
    ArgSpec("collective_name", "Collective name", "str"),
    ArgSpec("in_msg_nelems", "In msg nelems", "int", 0),
    ArgSpec("out_msg_nelems", "Out msg nelems", "int", 0),
    ArgSpec("in_msg_size", "In msg size", "int", 0),
    ArgSpec("out_msg_size", "Out msg size", "int", 0),
    ArgSpec("group_size", "Group size", "int", 0),
    ArgSpec("msg_dtype", "dtype", "str"),
    ArgSpec("in_split_size", "In split size", "raw"),
    ArgSpec("out_split_size", "Out split size", "raw"),
    ArgSpec("process_group_name", "Process Group Name", "str"),
    ArgSpec("process_group_desc", "Process Group Description", "str"),
    ArgSpec("process_group_ranks", "Process Group Ranks", "raw"),
    ArgSpec("process_rank", "Rank", "int"),
    ArgSpec("seq_num", "Seq", "int"),
    ArgSpec("p2p_src", "Src Rank", "int"),  # a recv's sender (global rank)
    ArgSpec("p2p_dst", "Dst Rank", "int"),  # a send's receiver (global rank)
    ArgSpec("kernel_backend", "kernel_backend", "str"),
    ArgSpec("kernel_hash", "kernel_hash", "str"),
    ArgSpec("cbid", "cbid", "int"),
    ArgSpec("grid", "grid", "raw"),
    ArgSpec("block", "block", "raw"),
    # MTIA
    ArgSpec("stream_id", "stream_id", "str"),
)

# Args of metadata (M), memory-instant and flow events.
META_ARG_SPECS: tuple[ArgSpec, ...] = (
    ArgSpec("m_name", "name", "raw"),
    ArgSpec("m_labels", "labels", "raw"),
    ArgSpec("m_sort_index", "sort_index", "raw"),
    ArgSpec("mem_bytes", "Bytes", "raw"),
    ArgSpec("mem_total_allocated", "Total Allocated", "raw"),
    ArgSpec("mem_total_reserved", "Total Reserved", "raw"),
    ArgSpec("mem_addr", "Addr", "raw"),
    ArgSpec("mem_device_type", "Device Type", "raw"),
    ArgSpec("mem_device_id", "Device Id", "raw"),
)

INT_ARGS = tuple(s.column for s in ARG_SPECS if s.kind == "int")
FLOAT_ARGS = tuple(s.column for s in ARG_SPECS if s.kind == "float")
STR_ARGS = tuple(s.column for s in ARG_SPECS if s.kind in ("str", "raw"))

# Columns of the per-rank events table, in order, with their numpy dtypes.
BASE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("index", "int64"),  # position in traceEvents
    ("cat", "int32"),  # string id, -1 when the event has no cat
    ("name", "int32"),  # string id
    ("pid", "int64"),
    ("tid", "int64"),
    ("ts_ns", "int64"),
    ("dur_ns", "int64"),
)


def event_columns() -> list[tuple[str, str]]:
    cols = list(BASE_COLUMNS)
    for s in ARG_SPECS:
        cols.append((s.column, {"int": "int64", "float": "float64", "str": "int32", "raw": "int32"}[s.kind]))
    return cols


# Columns holding ids into a string table, per table (remapped when tables are merged).
ID_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("cat", "name") + STR_ARGS,
    "instants": ("cat", "name", "ph", "scope"),
    "counters": ("cat", "name", "ph", "series"),
    "flows": ("cat", "name", "ph", "bp"),
    "names": ("cat", "name", "ph", "m_name", "m_labels", "m_sort_index"),
}


def compact_ints(a: np.ndarray) -> np.ndarray:
    """The smallest signed integer dtype that holds ``a`` (storage only; views widen again)."""
    if a.dtype.kind != "i" or a.dtype.itemsize == 1 or len(a) == 0:
        return a
    return compact_in_range(a, int(a.min()), int(a.max()))


def compact_in_range(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """:func:`compact_ints` of a signed integer array whose least and greatest values are known (``lo``, ``hi``)."""
    for dt in (np.int8, np.int16, np.int32):
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return a.astype(dt) if np.dtype(dt).itemsize < a.dtype.itemsize else a
    return a
