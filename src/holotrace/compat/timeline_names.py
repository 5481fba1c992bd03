"""Event names as HTA's timeline plots label them (``hta.common.timeline``, ``hta.analyzers.timeline``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.errors import AnalysisError

__all__ = ["simplify_name"]


_KEEP = re.compile(r"(^##.+##$)|(^<.+>$)|(^Mem\w+(\s+\w+)?\s+\(.+\)$)")
_LEAD = re.compile(r"^(void\s+)?([\w_:.#\s<>,]+)(\(.+\))?")


def simplify_name(name: str, max_length: int = 45) -> str:
    """HTA's timeline label of an event name: ``void at::native::(anonymous namespace)::foo<int>(int)`` →
    ``at::native::anon::foo<int>``; annotations ``## x ##``, ``<...>`` and ``Memcpy ... (...)`` kept; names
    of ``max(20, max_length)`` characters or more cut to ``max_length - 3`` plus ``...``."""
    max_length = max(20, max_length)
    if not _KEEP.match(name):
        name = name.replace("(anonymous namespace)::", "anon::")
        name = re.sub(r"^void\s+", "", name)
        name = name.replace("autograd::engine::evaluate_function: ", "autograd::")
        m = _LEAD.match(name)
        if m:
            name = m.group(2)
    return name if len(name) < max_length else name[: max_length - 3] + "..."


def _old_simplify(name: str, hta_compat: bool) -> str:
    """The older module's label: templates, ``void``, spaces and the argument list removed."""
    if hta_compat:  # HTA deletes from the first "(" to the last ")"
        name = re.sub(r"\(.+\)", "", name)
    else:
        name = name.replace("(anonymous namespace)", "anon")
        m = re.match(r"^(Mem\w+(?:\s+\w+)?)\s+\(.+\)$", name)
        name = m.group(1) if m else name.split("(", 1)[0]
    for pat in (r"<[^<]+>?", r"^void\s+", r"\s+", r"autograd::engine::evaluate_function"):
        name = re.sub(pat, "", name)
    return name if len(name) < 45 else name[:42] + "..."


def _decode(col: pd.Series, symbol_table, fn: Optional[Callable[[str], str]]) -> np.ndarray:
    """Names of a column of symbol ids (or of strings), through ``fn``, computed once per distinct value."""
    values = col.to_numpy()
    uniq, inv = np.unique(
        values.astype(str) if values.dtype == object or not np.issubdtype(values.dtype, np.number) else values,
        return_inverse=True,
    )
    if np.issubdtype(uniq.dtype, np.number):
        if symbol_table is None:
            raise AnalysisError(
                "symbol ids cannot be decoded without a symbol table",
                fix="pass the Trace's symbol_table, or a frame with string names",
            )
        table = symbol_table.get_sym_table()
        texts = [table[int(i)] if 0 <= int(i) < len(table) else "" for i in uniq.tolist()]
    else:
        texts = uniq.tolist()
    out = np.array([fn(s) if fn else s for s in texts] + [""], dtype=object)
    return out[inv.reshape(-1)] if len(values) else out[:0]


def _label(prefix: str, col: pd.Series) -> pd.Series:
    if pd.api.types.is_string_dtype(col) and not pd.api.types.is_numeric_dtype(col):
        return f"{prefix} " + col.astype(str).str.pad(width=5, side="right")
    return f"{prefix} " + col.astype(str).str.zfill(3)
