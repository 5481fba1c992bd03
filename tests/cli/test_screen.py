"""What every command shows on real jobs (the bundled traces and, when present, the whole corpus).

* names: no two rows of a table print the same name while their full names differ;
* stderr: ``summary``, ``advise`` and ``report`` print nothing at the default level but warnings (each once)
  or the one line of an error;
"""

from __future__ import annotations

import pytest
from corpus import golden_jobs
from screen import run_all

from holotrace.render.tables import table_cells

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
        assert r.code in (0, 2), (r.command, r.code, r.err[-500:])
        if r.code:
            assert r.err.count("holotrace: error:") == 1 and "Traceback" not in r.err, (r.command, r.err)


def test_stderr_holds_warnings_only_each_once(runs):
    for r in runs:
        if r.command not in ("summary", "advise", "report"):
            continue
        lines = r.err.splitlines()
        assert len(lines) == len(set(lines)), (r.command, lines)
        assert all(line.startswith(("holotrace: warning: ", "holotrace: error: ")) for line in lines), (r.command, lines)


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
