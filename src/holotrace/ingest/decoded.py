"""What a decode gives for one trace file (:class:`DecodedFile`), and putting its mapped tables in it
(:func:`set_tables`): all a cache hit needs, without the decoder (:mod:`holotrace.ingest.decode`) or its JSON
library."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from holotrace.ingest.columns import Problem
from holotrace.schema import event_columns

__all__ = ["DecodedFile", "set_tables"]


@dataclass
class DecodedFile:
    """Columnar content of one trace file, with a file-local string table."""

    path: str
    meta: dict
    strings: list[str]
    events: dict[str, np.ndarray]  # events with a duration (X and friends)
    instants: dict[str, np.ndarray]  # ph i/I/n (memory events among them)
    counters: dict[str, np.ndarray]  # ph C, one row per (event, series)
    flows: dict[str, np.ndarray]  # ph s/t/f
    names: dict[str, np.ndarray]  # ph M (process/thread names)
    n_trace_events: int = 0
    phase_counts: dict[str, int] = field(default_factory=dict)
    ts_is_float: bool = False  # any event wrote a fractional/float ts (HTA rounds then)
    problems: list[Problem] = field(default_factory=list)
    raw_args: Optional[list] = None  # per event of ``events``, with all_args=True
    format: str = "object"  # "object" | "array" (legacy 2021 bare array)
    bytes_read: int = 0
    packed: Optional[tuple] = None  # (packed column file, layout, token) the tables are mapped from
    ids_used: Optional[dict] = None  # {table: {id column: mask over ``strings``}} (ingest.ids_used); None: unknown
    checks: Optional[list] = None  # the events' findings (model.validate.rank_checks), once derived; None: unknown
    boot: Optional[str] = None  # the boot of the machine that packed the columns (ingest.cache.boot)
    content_crc32: Optional[int] = None  # the file's CRC-32, taken while it was read (None: not every byte passed)
    columns_crc32: Optional[int] = None  # the packed column file's, taken while it was written (None: unknown)


def set_tables(d: DecodedFile, tables: dict[str, dict[str, np.ndarray]]) -> None:
    """Put mapped ``tables`` into ``d``: every table present, events in schema order (empty columns of the
    schema's dtypes when the file has no events)."""
    for t in ("events", "instants", "counters", "flows", "names"):
        setattr(d, t, dict(tables.get(t, {})))
    if not d.events:
        d.events = {col: np.empty(0, dtype=dt) for col, dt in event_columns()}
