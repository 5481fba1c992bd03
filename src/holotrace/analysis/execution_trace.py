"""PyTorch execution traces (ET, the PARAM format) joined to Kineto events (spec 14 §4).

An ET file (``{schema, pid, time, start_ts, finish_ts, nodes: [...]}``) lists one node per recorded operator
with its record-function id ``rf_id``; a Kineto ``cpu_op``/``user_annotation`` event carries the same number
as ``External id``. :func:`load_execution_trace` parses the file natively (no PARAM dependency);
:func:`et_node_column` joins ``external_id == rf_id`` and reports the match rate; :func:`et_attribute` reads a node
attribute for joined rows.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass

import numpy as np

from holotrace.errors import TraceFormatError, TraceNotFoundError

__all__ = [
    "ExecutionTrace",
    "load_execution_trace",
    "et_node_column",
    "et_attribute",
    "ET_SUPPORTED_CATEGORIES",
    "ET_COLUMNS",
]

ET_SUPPORTED_CATEGORIES = ("cpu_op", "user_annotation")
ET_COLUMNS = ("op_schema", "input_shapes", "input_types", "output_shapes", "output_types", "et_node_name")
_ROOT_MARKS = ("execution_trace|thread", "execution_trace|process")


@dataclass
class ExecutionTrace:
    """An execution trace: the document's top-level fields and ``nodes`` as ``{id: node dict}``."""

    schema: str
    nodes: dict[int, dict]
    meta: dict

    @property
    def rf_range(self) -> tuple[int, int] | None:
        """``(min, max)`` ``rf_id`` of the operator nodes (thread/process roots left out)."""
        ids = [
            n["rf_id"]
            for n in self.nodes.values()
            if n.get("rf_id") is not None and not any(m in str(n.get("name", "")) for m in _ROOT_MARKS)
        ]
        return (min(ids), max(ids)) if ids else None

    def rf_to_node(self) -> dict[int, int]:
        """``rf_id → node id`` (a later node wins, as in HTA)."""
        return {int(n["rf_id"]): int(i) for i, n in self.nodes.items() if n.get("rf_id") is not None}


def load_execution_trace(et_file) -> ExecutionTrace:
    """Parse an ET file (``.json`` or ``.json.gz``, detected by content)."""
    try:
        with open(et_file, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise TraceNotFoundError("no such execution-trace file", path=et_file) from None
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        doc = json.loads(raw)
        nodes = {int(n["id"]): n for n in doc["nodes"]}
    except (ValueError, KeyError, TypeError):
        raise TraceFormatError(
            "not a PyTorch execution trace (expected a JSON object with a 'nodes' list of nodes with an 'id')",
            path=et_file,
            fix="pass the file ExecutionTraceObserver wrote",
        ) from None
    return ExecutionTrace(str(doc.get("schema", "")), nodes, {k: v for k, v in doc.items() if k != "nodes"})


def et_node_column(external_id: np.ndarray, supported: np.ndarray, et: ExecutionTrace) -> tuple[np.ndarray, dict]:
    """ET node id per row (float64, NaN where none) and a match report.

    Args:
        external_id: per row, the event's ``External id`` (−1 absent).
        supported: per row, the event is a ``cpu_op``/``user_annotation``.

    Returns:
        ``(et_node, report)``; report: ``rows`` (supported rows), ``matched``, ``match_rate``, ``contained``
        (HTA's overlap test: the trace's External-id range holds the ET's ``rf_id`` range).
    """
    lut = et.rf_to_node()
    keys = np.fromiter(lut.keys(), dtype=np.int64, count=len(lut))
    vals = np.fromiter(lut.values(), dtype=np.float64, count=len(lut))
    order = np.argsort(keys)
    keys, vals = keys[order], vals[order]
    ext = np.asarray(external_id, dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, ext), 0, max(len(keys) - 1, 0))
    hit = supported & (len(keys) > 0) & (keys[pos] == ext if len(keys) else False)
    out = np.full(len(ext), np.nan)
    out[hit] = vals[pos[hit]]
    rf = et.rf_range
    contained = bool(rf is not None and len(ext) and ext.min() <= rf[0] and ext.max() >= rf[1])
    n = int(np.sum(supported))
    return out, {
        "rows": n,
        "matched": int(hit.sum()),
        "match_rate": float(hit.sum() / n) if n else 0.0,
        "contained": contained,
    }


def et_attribute(et_node: np.ndarray, et: ExecutionTrace, column: str) -> np.ndarray:
    """The ET attribute ``column`` (one of :data:`ET_COLUMNS`) per row (object array; NaN without a node)."""
    if column not in ET_COLUMNS:
        raise ValueError(f"Unknown column {column!r}; expected one of {', '.join(ET_COLUMNS)}")
    key = "name" if column == "et_node_name" else column
    out = np.full(len(et_node), np.nan, dtype=object)
    ok = ~np.isnan(et_node)
    out[ok] = [et.nodes[int(i)].get(key) for i in et_node[ok].tolist()]
    return out
