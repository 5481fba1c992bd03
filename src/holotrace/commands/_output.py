"""Output options and writer shared by every analysis command.

A command builds a :class:`Report` — display sections (compact tables for
people) and data frames (the full results, for programs) — and calls
:func:`emit`:

* ``--format table`` (default): titled text tables that fit 80 columns;
* ``--format markdown``: the same sections as markdown;
* ``--format json``: one JSON object ``{"meta": ..., "<key>": [rows], ...}`` of the data frames;
* ``--format csv``: every data frame as CSV, each after a ``# <key>`` line;
* ``--output DIR``: additionally write every data frame to ``DIR/<key>.<ext>``
  in the formats of ``--output-format`` (``csv``, ``parquet``, ``json``; default csv).

Usage in a command module::

    from holotrace.commands._output import Report, Section, add_output_options, emit

    def add_parser(sub):
        p = sub.add_parser("launches", ...)
        add_load_options(p)
        add_output_options(p)
        p.set_defaults(run=run)

    def run(args):
        job = load_job(args)
        report = Report(title="...", sections=[Section("launch_stats", "Launch statistics", df)])
        return emit(report, args)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional, TextIO

from holotrace.commands._dest import writes
from holotrace.render.tables import FORMATS, format_markdown, format_table, to_records, write_frames
from holotrace.table import Table
from holotrace.text import sanitize

__all__ = ["Section", "Report", "add_output_options", "emit", "terminal_width", "writes_frames"]

DISPLAY_FORMATS = ("table", "json", "csv", "markdown")


@dataclass
class Section:
    """One titled table of a report.

    Attributes:
        key: machine name (file stem with ``--output``, JSON key).
        title: the heading people read.
        frame: the table shown (already trimmed/renamed for display): a :class:`~holotrace.table.Table` or a
            pandas frame.
        notes: lines printed under the table (caveats that affect the numbers).
        lines: free text printed instead of / after the table (wrapped to the width).
        digits: decimals per column for display.
        max_rows: show at most this many rows in table/markdown output.
    """

    key: str
    title: str
    frame: object = field(default_factory=Table)
    notes: list[str] = field(default_factory=list)
    digits: dict[str, int] = field(default_factory=dict)
    max_rows: Optional[int] = None
    lines: list[str] = field(default_factory=list)


@dataclass
class Report:
    """What a command prints: a title, lines under it, sections, and the full data.

    ``data`` holds the complete result tables (:class:`~holotrace.table.Table` or pandas frames) written by
    ``--output`` and printed by ``--format json|csv``; when empty, the section frames are used.
    ``objects``: JSON-ready values added as top-level keys of ``--format json``.
    """

    title: str
    sections: list[Section]
    header: list[str] = field(default_factory=list)
    data: dict[str, object] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    objects: dict = field(default_factory=dict)

    def frames(self) -> Mapping[str, object]:
        return self.data or {s.key: s.frame for s in self.sections}


def add_output_options(p: argparse.ArgumentParser) -> None:
    """Add ``--format``, ``--output`` and ``--output-format`` to a command's parser."""
    g = p.add_argument_group("output")
    g.add_argument(
        "--format",
        choices=DISPLAY_FORMATS,
        default="table",
        help="what to print: readable tables (default), markdown, or the full results as JSON or CSV",
    )
    g.add_argument("--output", metavar="DIR", help="also write every result table to DIR (one file per table)")
    g.add_argument(
        "--output-format",
        default="csv",
        metavar="LIST",
        help=f"file formats written with --output, comma-separated: {', '.join(FORMATS)} (default csv)",
    )
    g.add_argument(
        "--width",
        type=int,
        default=None,
        metavar="N",
        help="table width in characters (default: the terminal's width; 80 when not a terminal)",
    )
    g.add_argument(
        "--wide", action="store_true", help="print names in full (tables may then be wider than the terminal)"
    )
    writes(p, "output", "folder")


def terminal_width(requested: Optional[int] = None) -> int:
    """Width for text tables: ``requested``, else the terminal's (80 when not a terminal)."""
    if requested:
        return max(40, requested)
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((80, 24)).columns)
    return 80


def _output_formats(spec: str) -> list[str]:
    from holotrace.errors import HolotraceError

    fmts = [f.strip().lower() for f in spec.split(",") if f.strip()]
    bad = [f for f in fmts if f not in FORMATS]
    if bad or not fmts:
        raise HolotraceError(
            f"unknown --output-format {spec!r}", fix=f"use a comma-separated list of {', '.join(FORMATS)}"
        )
    return fmts


def _csv_safe(df):
    """``df`` (a table or a frame) as a pandas frame with every text cell sanitised: CSV printed on a terminal
    (the files keep the exact text). Pandas writes the CSV."""
    import pandas as pd

    df = df.to_pandas() if isinstance(df, Table) else df
    text = [c for c in df.columns if df[c].dtype == object or pd.api.types.is_string_dtype(df[c])]
    if not text:
        return df
    out = df.copy()
    for c in text:
        out[c] = [sanitize(v) if isinstance(v, str) else v for v in df[c].tolist()]
    return out


def _wrap(text: str, width: int, first: str = "", rest: str = "") -> str:
    text = sanitize(text)  # the rendering boundary: a line may quote a name from a trace
    # whole words only: a long name overflows the line rather than being cut in two
    return textwrap.fill(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=rest or first,
        break_long_words=False,
        break_on_hyphens=False,
    )


def writes_frames(args: argparse.Namespace) -> bool:
    """Whether :func:`emit` writes a report's full frames (``--output``, ``--format json|csv``), not its sections
    alone: a command may leave out what only the full frames hold when it does not."""
    return bool(getattr(args, "output", None)) or getattr(args, "format", "table") in ("json", "csv")


def emit(report: Report, args: argparse.Namespace, out: Optional[TextIO] = None) -> int:
    """Print ``report`` in ``args.format`` and write files for ``args.output``; returns exit status 0."""
    out = out or sys.stdout
    fmt = getattr(args, "format", "table")
    if getattr(args, "output", None):
        paths = write_frames(report.frames(), args.output, _output_formats(getattr(args, "output_format", "csv")))
        if fmt in ("table", "markdown"):
            report.header.append(f"wrote {len(paths)} file(s) to {args.output}")
    if fmt == "json":
        doc = {"meta": report.meta, **{k: to_records(v) for k, v in report.frames().items()}, **report.objects}
        out.write(json.dumps(doc, indent=1, default=str) + "\n")
    elif fmt == "csv":
        for i, (key, df) in enumerate(report.frames().items()):
            if i:
                out.write("\n")
            out.write(f"# {sanitize(str(key))}\n")
            _csv_safe(df).to_csv(out, index=False)
    elif fmt == "markdown":
        parts = [f"## {sanitize(report.title)}", ""] + [f"{sanitize(h)}  " for h in report.header]
        for s in report.sections:
            shown = s.frame if s.max_rows is None else s.frame.head(s.max_rows)
            if s.lines and shown.empty:
                parts += ["", f"### {sanitize(s.title)}", ""] + [f"- {sanitize(line)}" for line in s.lines]
            else:
                parts += ["", format_markdown(shown, digits=s.digits, title=s.title)]
                parts += [f"- {sanitize(line)}" for line in s.lines]
            parts += [f"\n*{sanitize(n)}*" for n in s.notes]
        out.write("\n".join(parts) + "\n")
    else:
        width = terminal_width(getattr(args, "width", None))
        title = sanitize(report.title)
        parts = [title, "=" * min(len(title), width)]
        parts += [_wrap(h, width, "", "        ") for h in report.header]
        for s in report.sections:
            if s.lines and s.frame.empty:
                parts += ["", sanitize(s.title)]
            else:
                parts += [
                    "",
                    format_table(
                        s.frame,
                        width=None if getattr(args, "wide", False) else width,
                        digits=s.digits,
                        max_rows=s.max_rows,
                        title=s.title,
                    ),
                ]
            parts += [_wrap(line, width, "  ", "    ") for line in s.lines]
            parts += [_wrap(f"note: {n}", width, "  ", "        ") for n in s.notes]
        out.write("\n".join(parts) + "\n")
    return 0
