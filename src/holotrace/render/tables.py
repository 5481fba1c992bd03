"""Tables for people and for programs.

* :func:`format_table` — a plain-text table that fits a terminal width
  (80 columns by default): numbers right-aligned with sensible precision,
  the widest text column shortened with an ellipsis when the table is too wide;
* :func:`format_markdown` — a GitHub-flavoured markdown table;
* :func:`to_records` — JSON-ready rows (NaN → ``null``, numpy scalars → Python);
* :func:`write_frames` — one file per frame as CSV, Parquet or JSON.

Each takes a :class:`holotrace.table.Table` or a pandas frame (read as a table); only the CSV and Parquet
writers use pandas (imported then).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from holotrace.atomic import write_atomic, write_bytes
from holotrace.errors import HolotraceError, OutputError
from holotrace.table import Table
from holotrace.text import cut, fit_names, sanitize, structural_forms

__all__ = [
    "kernel_label",
    "format_table",
    "table_cells",
    "format_markdown",
    "to_records",
    "write_frames",
    "shorten",
    "sanitize",
    "FORMATS",
]

FORMATS = ("csv", "parquet", "json")
NAME_FLOOR = 24  # a text column is never shortened below this (or its natural width): names stay readable


shorten = cut  # a plain cut (start … end) for text that is not a name list


def kernel_label(name: str) -> str:
    """A display label for one kernel name: without a leading ``void`` and the trailing argument list
    (memory copies and sets, whose parentheses say the direction, are kept whole). Display only; a table
    of names goes through :func:`holotrace.text.fit_names`, which never makes two names alike."""
    return structural_forms(name)[1] or name


def _is_num(a: np.ndarray) -> bool:
    return a.dtype.kind in "iuf"


def _is_bool(a: np.ndarray) -> bool:
    return a.dtype.kind == "b"


def _text(a: np.ndarray) -> list[str]:
    return ["" if (v is None or (isinstance(v, float) and math.isnan(v))) else str(v) for v in a.tolist()]


def _format_column(a: np.ndarray, digits: Optional[int]) -> list[str]:
    if _is_bool(a):
        return ["yes" if v else "no" for v in a.tolist()]
    if not _is_num(a):
        return [sanitize(v) for v in _text(a)]
    values = a.astype(np.float64)
    finite = values[np.isfinite(values)]
    if digits is None:
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        digits = 0 if integral or a.dtype.kind in "iu" else 2
    out = []
    for v in values.tolist():
        if math.isnan(v):
            out.append("-")
        elif math.isinf(v):
            out.append("inf" if v > 0 else "-inf")
        else:
            out.append(f"{v:,.{digits}f}")
    return out


def table_cells(
    shown, *, width: Optional[int] = 80, digits: Optional[Mapping[str, int]] = None
) -> tuple[list[str], list[list[str]], list[int], list[bool]]:
    """What :func:`format_table` prints, before alignment: headers, each column's cells, column widths and
    which columns are numeric. Text columns too wide for ``width`` are shortened together by
    :func:`holotrace.text.fit_names` (two different values of a column never print alike)."""
    digits = dict(digits or {})
    shown = Table.of(shown)
    cols = [sanitize(str(c)) for c in shown.columns]
    cells = [_format_column(shown[c], digits.get(str(c))) for c in shown.columns]
    numeric = [_is_num(shown[c]) for c in shown.columns]
    widths = [max([len(h)] + [len(v) for v in col]) for h, col in zip(cols, cells)]
    sep = 2
    total = sum(widths) + sep * (len(widths) - 1)
    text_cols = [i for i, n in enumerate(numeric) if not n]
    natural = list(widths)
    while width is not None and total > width and text_cols:
        i = max(text_cols, key=lambda k: widths[k])
        floor = max(len(cols[i]), min(natural[i], NAME_FLOOR))
        if widths[i] <= floor:
            text_cols.remove(i)
            continue
        step = min(total - width, widths[i] - floor)
        widths[i] -= step
        total -= step
    for i, c in enumerate(shown.columns):
        if widths[i] < natural[i] and not numeric[i] and not _is_bool(shown[c]):
            cells[i] = fit_names(_text(shown[c]), widths[i])
            widths[i] = max([len(cols[i])] + [len(v) for v in cells[i]])
    return cols, cells, widths, numeric


def format_table(
    df,
    *,
    width: Optional[int] = 80,
    digits: Optional[Mapping[str, int]] = None,
    max_rows: Optional[int] = None,
    title: Optional[str] = None,
) -> str:
    """Render a frame as an aligned text table no wider than ``width`` when possible.

    Args:
        df: the table (a :class:`~holotrace.table.Table` or a frame); column names are the headers.
        width: target width in characters; the widest text columns are shortened until the table fits,
            by :func:`holotrace.text.fit_names` (by structure; two different values of a column never
            print alike, even if the table gets wider). ``None``: nothing shortened (``--wide``).
        digits: decimals per numeric column (default: 0 for integral values, else 2).
        max_rows: show at most this many rows, then a "… N more rows" line.
        title: a line printed above the table.

    Returns:
        The table as text (no trailing newline). An empty frame renders as ``(none)``.
    """
    digits = dict(digits or {})
    df = Table.of(df)
    lines = [sanitize(title)] if title else []
    if df.empty:
        lines.append("  (none)")
        return "\n".join(lines)
    shown = df if max_rows is None or len(df) <= max_rows else df.head(max_rows)
    cols, cells, widths, numeric = table_cells(shown, width=width, digits=digits)
    sep = 2

    def fmt(values: Sequence[str]) -> str:
        parts = []
        for v, w, n in zip(values, widths, numeric):
            parts.append(v.rjust(w) if n else v.ljust(w))
        return (" " * sep).join(parts).rstrip()

    lines.append(fmt(cols))
    lines.append((" " * sep).join("-" * w for w in widths))
    for row in zip(*cells):
        lines.append(fmt(row))
    if len(shown) < len(df):
        lines.append(f"… {len(df) - len(shown)} more rows")
    return "\n".join(lines)


def format_markdown(df, *, digits: Optional[Mapping[str, int]] = None, title: Optional[str] = None) -> str:
    """Render a frame as a markdown table (``|`` in cells escaped); ``title`` becomes a ``###`` heading."""
    digits = dict(digits or {})
    df = Table.of(df)
    lines = [f"### {sanitize(title)}", ""] if title else []
    if df.empty:
        lines.append("(none)")
        return "\n".join(lines)
    cells = [_format_column(df[c], digits.get(str(c))) for c in df.columns]
    numeric = [_is_num(df[c]) for c in df.columns]
    esc = lambda v: sanitize(str(v)).replace("|", "\\|")  # noqa: E731
    lines.append("| " + " | ".join(esc(c) for c in df.columns) + " |")
    lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
    for row in zip(*cells):
        lines.append("| " + " | ".join(esc(v) for v in row) + " |")
    return "\n".join(lines)


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def to_records(df) -> list[dict]:
    """Rows as JSON-ready dicts: NaN/inf → ``None``, numpy scalars → Python scalars."""
    t = Table.of(df)
    cols = [str(c) for c in t.columns]
    return [{c: _plain(v) for c, v in zip(cols, row)} for row in t.records()]


def _frame(df):
    """A pandas frame of ``df`` (a table or a frame), for the writers that pandas does."""
    return df.to_pandas() if isinstance(df, Table) else df


def write_frames(frames: Mapping[str, object], out_dir, formats: Iterable[str] = ("csv",)) -> list[Path]:
    """Write every frame as ``<out_dir>/<key>.<format>``.

    Args:
        frames: file stem → frame.
        out_dir: created if absent.
        formats: any of ``csv``, ``parquet``, ``json`` (records, NaN → null).

    Returns:
        The paths written, in order.
    """
    out = Path(out_dir)
    if not str(out_dir).strip():
        raise HolotraceError("the output folder is an empty path", fix="pass a folder to write the tables into")
    if out.exists() and not out.is_dir():
        raise HolotraceError(
            "--output names a file, not a folder", path=out, fix="pass a folder (it is created if absent)"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HolotraceError(
            f"cannot create the output folder ({e.strerror or e})", path=out, fix="pass a folder you can write to"
        ) from None
    written = []
    for fmt in formats:
        if fmt not in FORMATS:
            raise ValueError(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})")
    try:
        _write_all(frames, out, formats, written)
    except OutputError:
        raise
    except OSError as e:
        raise HolotraceError(
            f"cannot write the output ({e.strerror or e})",
            path=getattr(e, "filename", None) or out,
            fix="pass a folder you can write to",
        ) from None
    return written


def _write_all(frames: Mapping[str, object], out: Path, formats: Iterable[str], written: list) -> None:
    for key, df in frames.items():
        for fmt in formats:
            p = out / f"{key}.{fmt}"
            if fmt == "csv":
                write_bytes(p, _frame(df).to_csv(index=False).encode("utf-8"))
            elif fmt == "parquet":
                write_atomic(p, lambda fh, df=df: _frame(df).reset_index(drop=True).to_parquet(fh, index=False))
            else:
                write_bytes(p, (json.dumps(to_records(df), indent=1) + "\n").encode("utf-8"))
            written.append(p)
