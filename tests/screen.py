"""Run every command on a job as a user would, and keep what it showed: stdout, stderr, every text table
(the frame and the width it was printed at) and every report object (sections with their notes).

Used by the tests of what reaches the screen (names, stderr, notes, escape sequences)."""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from holotrace.cli import main

# (command, extra arguments); {job} is the trace folder, {out} a scratch folder
COMMANDS = (
    ("info", []),
    ("doctor", []),
    ("summary", []),
    ("launches", []),
    ("sequences", ["--op", "aten::", "--min-len", "2"]),
    ("annotations", []),
    ("stragglers", []),
    ("critical-path", []),
    ("advise", []),
    ("memory", []),
    ("counters", []),
    ("cupti", []),
    ("rules", []),
    ("diff", ["{job}"]),
    ("report", ["-o", "{out}/report.html"]),
)


@dataclass
class Run:
    command: str
    code: int
    out: str
    err: str
    tables: list = field(default_factory=list)  # (frame, width, max_rows)
    reports: list = field(default_factory=list)


def _holotrace_modules():
    return [m for name, m in list(sys.modules.items()) if name.startswith("holotrace") and m is not None]


@contextlib.contextmanager
def _captured(run: Run):
    """Every ``format_table`` call and every report passed to ``emit``, from whichever module calls them."""
    import holotrace.commands._output as output
    import holotrace.render.tables as tables

    real_table, real_emit = tables.format_table, output.emit

    def table(df, *a, **k):
        run.tables.append((df, k.get("width", 80), k.get("max_rows")))
        return real_table(df, *a, **k)

    def emit(report, *a, **k):
        run.reports.append(report)
        return real_emit(report, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        for m in _holotrace_modules():
            if getattr(m, "format_table", None) is real_table:
                mp.setattr(m, "format_table", table)
            if getattr(m, "emit", None) is real_emit:
                mp.setattr(m, "emit", emit)
        yield


def run_command(command: str, extra: list[str], job: Path, scratch: Path, *, options=()) -> Run:
    """One command on ``job`` through the CLI's ``main``, stdout and stderr captured."""
    import importlib

    importlib.import_module("holotrace.commands." + command.replace("-", "_"))
    argv = [command, str(job), *[a.format(job=job, out=scratch) for a in extra], *options]
    out, err = io.StringIO(), io.StringIO()
    run = Run(command, -1, "", "")
    with _captured(run), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        run.code = main(argv)
    run.out, run.err = out.getvalue(), err.getvalue()
    return run


def run_all(job: Path, scratch: Path, *, options=()) -> list[Run]:
    return [run_command(c, extra, job, scratch, options=options) for c, extra in COMMANDS]
