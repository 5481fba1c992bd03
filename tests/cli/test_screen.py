"""What every command shows on real jobs (the bundled traces and, when present, the whole corpus).

* names: no two rows of a table print the same name while their full names differ;
* stderr: ``summary``, ``advise`` and ``report`` print nothing at the default level but warnings (each once)
  or the one line of an error;
* notes and headers: every percentage column's denominator (and the note naming it) holds on the numbers;
  steps are named by id and counted.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from corpus import golden_jobs
from holotrace.render.tables import table_cells
from holotrace.table import Table
from screen import run_all

JOBS = [(name, traces) for name, traces, _ in golden_jobs(include_reordered=False)]


@pytest.fixture(scope="module", params=JOBS, ids=[j[0] for j in JOBS])
def runs(request, tmp_path_factory):
    name, traces = request.param
    scratch = tmp_path_factory.mktemp("screen")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOLOTRACE_CACHE_DIR", str(scratch / "cache"))
        mp.setenv("COLUMNS", "100")
        return run_all(traces, scratch)


def test_every_command_runs_or_says_why_in_one_line(runs):
    for r in runs:
        assert r.code in ((0, 1, 2) if r.command == "doctor" else (0, 2)), (r.command, r.code, r.err[-500:])
        if r.code == 2:
            assert r.err.count("holotrace: error:") == 1 and "Traceback" not in r.err, (r.command, r.err)


def test_stderr_holds_warnings_only_each_once(runs):
    for r in runs:
        if r.command not in ("summary", "advise", "report"):
            continue
        lines = r.err.splitlines()
        assert len(lines) == len(set(lines)), (r.command, lines)
        assert all(line.startswith(("holotrace: warning: ", "holotrace: error: ")) for line in lines), (
            r.command,
            lines,
        )


def test_no_two_rows_print_one_name_for_two(runs):
    for run in runs:
        for df, width, max_rows in run.tables:
            shown = df if max_rows is None else df.head(max_rows)
            if shown.empty:
                continue
            cols, cells, _, numeric = table_cells(shown, width=width)
            for i, c in enumerate(shown.columns):
                if numeric[i]:
                    continue
                full: dict[str, set] = {}
                for printed, value in zip(cells[i], shown[c].tolist()):
                    full.setdefault(printed, set()).add(str(value))
                alike = {p: v for p, v in full.items() if len(v) > 1}
                assert not alike, (run.command, c, alike)


# ---------------------------------------------------------------------------- notes and headers say what they show
def _close(a, b, tol):
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=tol, equal_nan=True)


def _temporal(df, notes):  # shares of the span: idle + compute + non-compute = 100 per rank with GPU work
    df = df[df["span ms"] > 0]
    assert _close(df["idle %"] + df["compute %"] + df["non-compute %"], 100.0, 0.01)
    assert (df["busy ms"] <= df["span ms"] + 1e-9).all()


def _idle_causes(df, notes):  # shares of the rank's stream idle time
    some = df[df["stream idle ms"] > 0]
    assert _close(some["host wait %"] + some["kernel wait %"] + some["other %"], 100.0, 0.01)


def _overlap(df, notes):  # hidden % = overlapped / communication
    some = df[df["comm ms"] > 0]
    assert _close(some["hidden %"], 100.0 * some["overlapped ms"] / some["comm ms"], 0.01)


def _kernel_types(df, notes):  # every type (and overlap) of the GPU time, sharing 100 %
    assert _close(df["%"].sum(), 100.0, 0.05)
    assert _close(df["%"], 100.0 * df["time ms"] / df["time ms"].sum(), 0.05)


def _top_kernels(df, notes):  # % of all = total ms / the denominator the note names; never over 100 together
    denominator = float(re.search(r"total ms / ([\d,.]+) ms", notes[0]).group(1).replace(",", ""))
    assert np.allclose(df["% of all"], 100.0 * df["total ms"] / denominator, rtol=1e-3, atol=1e-9)
    assert df["% of all"].sum() <= 100.0 + 1e-6


def _critical_steps(df, notes):  # per step, the bounds share the path: 100 % and the path's length
    for _, g in df.groupby("step"):
        assert _close(g["% of path"].sum(), 100.0, 0.05)
        assert _close(g["duration us"].sum(), g["path us"].iloc[0], 1e-3 * max(1.0, g["path us"].iloc[0]))


def _fixes(df, notes):  # % of step = saving / the measured step (the prediction plus the saving)
    assert np.allclose(
        df["% of step"], 100.0 * df["saving ms"] / (df["predicted ms"] + df["saving ms"]), rtol=1e-6, atol=1e-6
    )


def _replay(df, notes):  # error % = (replayed - measured) / measured
    assert np.allclose(
        df["error_pct"], 100.0 * (df["replayed_ms"] - df["measured_ms"]) / df["measured_ms"], rtol=1e-6, atol=1e-6
    )


CLAIMS = {
    ("summary", "temporal"): _temporal,
    ("summary", "idle_causes"): _idle_causes,
    ("summary", "overlap"): _overlap,
    ("summary", "kernel_types"): _kernel_types,
    ("summary", "top_kernels"): _top_kernels,
    ("critical-path", "steps"): _critical_steps,
    ("advise", "fixes"): _fixes,
    ("advise", "replay"): _replay,
}
# percentage columns that are statistics, not shares (quartiles of a series)
NOT_SHARES = {("counters", "queue_length"), ("counters", "memory_bandwidth"), ("diff", "kernels")}


def test_every_note_and_share_holds(runs):
    for run in runs:
        for report in run.reports:
            for s in report.sections:
                key = (run.command, s.key)
                if any("%" in str(c) for c in s.frame.columns) and key not in NOT_SHARES:
                    assert key in CLAIMS, f"{key}: a percentage column whose denominator no test checks"
                if key in CLAIMS and not s.frame.empty:
                    frame = s.frame.to_pandas() if isinstance(s.frame, Table) else s.frame
                    CLAIMS[key](frame, s.notes)


def test_steps_are_named_by_id_and_counted(runs):
    for run in runs:
        for report in run.reports:
            for line in report.header:
                m = re.match(r"steps\s+(\d+) steps? \(ids? ([^)]*)\)", line)
                if m and "…" not in m.group(2):
                    assert int(m.group(1)) == len(m.group(2).split(", ")), line
                if line.startswith("steps "):
                    assert m or "none" in line, line
