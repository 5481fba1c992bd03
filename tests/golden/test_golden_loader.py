"""The loader against HTA 0.6.1's own figures: events by category and the per-rank summary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import holotrace
from corpus import golden_jobs
from holotrace.compat.hta_table import hta_table
from holotrace.model.classify import HTA
from holotrace.model.view import job_view

JOBS = [j for j in golden_jobs() if (j[2] / "event_counts_by_cat.csv").exists()]


@pytest.fixture(scope="module", params=JOBS, ids=[j[0] for j in JOBS])
def loaded(request):
    name, traces, golden = request.param
    job = holotrace.load(traces, cache=False)
    view = job_view(job, HTA)
    return name, job, golden, {r: hta_table(view[r], job.strings) for r in job.ranks}


def test_event_counts_by_category(loaded):
    name, job, golden, tables = loaded
    g = pd.read_csv(golden / "event_counts_by_cat.csv")
    rows = []
    for r in job.ranks:
        df = tables[r]
        for cat, grp in df.groupby("s_cat"):
            rows.append((r, cat, len(grp), float(grp["dur"].sum())))
    mine = (
        pd.DataFrame(rows, columns=["rank", "cat", "count", "total_dur"])
        .sort_values(["rank", "cat"])
        .reset_index(drop=True)
    )
    g = g.sort_values(["rank", "cat"]).reset_index(drop=True)
    assert mine[["rank", "cat", "count"]].values.tolist() == g[["rank", "cat", "count"]].values.tolist()
    np.testing.assert_allclose(mine["total_dur"], g["total_dur"], rtol=1e-9)
    # the number of GPU kernels HTA keeps equals ours
    kern = g[g["cat"] == "kernel"]
    for _, row in kern.iterrows():
        df = tables[int(row["rank"])]
        assert int((df["s_cat"] == "kernel").sum()) == row["count"]


def test_trace_summary(loaded):
    name, job, golden, tables = loaded
    f = golden / "trace_summary.csv"
    if not f.exists():
        pytest.skip("HTA wrote no trace summary for this job")
    g = pd.read_csv(f)
    assert sorted(g["rank"].tolist()) == job.ranks
    for _, row in g.iterrows():
        df = tables[int(row["rank"])]
        assert len(df) == row["rows"]
        assert int((df["stream"] != -1).sum()) == row["gpu_rows"]
        assert int(df["ts"].min()) == row["ts_min"]
        iters = sorted(set(df["iteration"].dropna().astype(int)) - {-1})
        expected = [] if pd.isna(row["iterations"]) else [int(x) for x in str(row["iterations"]).split()]
        assert iters == expected


def test_native_counts_cover_all_raw_events(loaded):
    """Native tables keep every event with a duration (HTA additionally drops 'Trace' spans and filters the last step)."""
    name, job, golden, tables = loaded
    for r in job.ranks:
        t = job.rank(r)
        assert t.n_events == sum(v for k, v in t.phase_counts.items() if k == "X") or t.n_events <= t.n_trace_events
        assert (t.columns["dur_ns"] >= 0).all()
