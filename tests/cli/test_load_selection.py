"""``--ranks`` / ``--steps`` on a loading command: ``holotrace summary PATH --steps A-B --ranks R`` analyses
just those ranks and steps.

The built job: 3 ranks x 4 steps; step s (1-4) spans [1000 s, 1000 s + 900] us and launches one kernel
``gemm`` at 1000 s + 20 us lasting 100 (r + 1) + 10 s us on rank r.
"""

from __future__ import annotations

import json

import pytest

from holotrace.cli import main
from tracebuilder import TraceBuilder


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("selection")
    for r in range(3):
        tb = TraceBuilder(rank=r, world_size=3)
        for s in range(1, 5):
            t = 1000.0 * s
            tb.annotation(f"ProfilerStep#{s}", t, 900.0)
            tb.launch_kernel(
                "gemm", cpu_ts_us=t + 10, cpu_dur_us=5.0, gpu_ts_us=t + 20, gpu_dur_us=100.0 * (r + 1) + 10.0 * s
            )
        tb.write(folder, name=f"rank{r}.json")
    return folder


def _summary(capsys, *argv):
    rc = main(["summary", *map(str, argv), "--no-cache", "--quiet", "--format", "json"])
    out = capsys.readouterr()
    return rc, out


def test_steps_and_ranks_select_what_is_analysed(job, capsys):
    rc, out = _summary(capsys, job, "--steps", "2-3", "--ranks", "1,2")
    assert rc == 0, out.err
    doc = json.loads(out.out)
    assert doc["meta"]["ranks"] == [1, 2] and doc["meta"]["steps"] == [2, 3]
    t = {row["rank"]: row for row in doc["temporal"]}
    assert sorted(t) == [1, 2]
    # rank 1: kernels of 220 and 230 us, from 2020 to 3020 + 230 us; rank 2: 320 and 330 us
    assert (t[1]["busy_us"], t[1]["span_us"], t[1]["idle_us"]) == (450.0, 1230.0, 780.0)
    assert (t[2]["busy_us"], t[2]["span_us"], t[2]["idle_us"]) == (650.0, 1330.0, 680.0)
    assert {(row["rank"], row["step"]) for row in doc["temporal_by_step"]} == {(1, 2), (1, 3), (2, 2), (2, 3)}


def test_without_selection_every_rank_and_step(job, capsys):
    rc, out = _summary(capsys, job)
    assert rc == 0, out.err
    doc = json.loads(out.out)
    assert doc["meta"]["ranks"] == [0, 1, 2] and doc["meta"]["steps"] == [1, 2, 3, 4]
    t0 = [row for row in doc["temporal"] if row["rank"] == 0][0]
    assert t0["busy_us"] == 110.0 + 120.0 + 130.0 + 140.0 and t0["span_us"] == 3000.0 + 140.0


def test_a_selection_of_nothing_is_a_one_line_error(job, capsys):
    rc = main(["summary", str(job), "--steps", "7-8", "--no-cache", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "--steps 7-8 selects no events" in err and "[1, 2, 3, 4]" in err


def test_a_huge_range_is_refused_in_one_line():
    from holotrace.errors import AnalysisError
    from holotrace.model.filter import MAX_LISTED, parse_int_ranges

    assert parse_int_ranges("0-3,7", "rank") == (0, 1, 2, 3, 7)
    with pytest.raises(AnalysisError, match=f"names more than {MAX_LISTED:,} values"):
        parse_int_ranges("0-2000000000", "step")
