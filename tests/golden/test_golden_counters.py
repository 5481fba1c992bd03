"""Queue length, memory bandwidth, blocked time and CUPTI counters of the facade against HTA 0.6.1.

For every job with reference outputs (bundled tests/data and, when present, the shared corpus): values
within 1e-6 relative, rows compared after sorting by their keys (HTA's files are sorted). Documented
difference (docs/compatibility.md): holotrace snaps the memory bandwidth to exactly 0 when no copy of a
kind runs, where HTA's running float sum can leave a residue such as 1.1e-16 that its summary then counts
as a positive sample; ``hta_compat=True`` keeps the residue and matches HTA's summary exactly.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from corpus import golden_jobs

from holotrace import TraceAnalysis

RTOL = 1e-6
JOBS = [j for j in golden_jobs() if (j[2] / "meta.json").exists()]


@pytest.fixture(scope="module", params=JOBS, ids=[j[0] for j in JOBS])
def job(request):
    name, traces, golden = request.param
    meta = json.loads((golden / "meta.json").read_text())
    if meta.get("status", {}).get("load") != "ok":
        pytest.skip(f"HTA could not load {name}")
    rank_map = {int(r): f for r, f in meta["rank_map"].items()}
    ta = TraceAnalysis(trace_files=rank_map, trace_dir=str(traces), cache=False)
    return name, ta, golden, meta


def _flat(summary: pd.DataFrame | None, key: str) -> pd.DataFrame:
    """A summary with MultiIndex columns as the golden CSV writes it (``value|stat``)."""
    df = summary.copy()
    df.columns = [f"{a}|{b}" for a, b in df.columns]
    return df.reset_index()


def _compare(mine: pd.DataFrame, gold: pd.DataFrame, keys: list[str]) -> None:
    assert list(mine.columns) == list(gold.columns)
    a = mine.sort_values(keys, kind="stable", ignore_index=True)
    b = gold.sort_values(keys, kind="stable", ignore_index=True)
    assert a[keys].astype(str).values.tolist() == b[keys].astype(str).values.tolist()
    num = [c for c in a.columns if c not in keys]
    np.testing.assert_allclose(a[num].to_numpy(float), b[num].to_numpy(float), rtol=RTOL, atol=1e-12)


def _ranks(meta: dict, key: str) -> list[int]:
    return meta.get("params", {}).get(key, {}).get("ranks") or [0]


def test_queue_length_summary(job):
    name, ta, golden, meta = job
    f = golden / "queue_length_summary.csv"
    mine = ta.get_queue_length_summary(ranks=_ranks(meta, "queue_length_summary"))
    if not f.exists():
        # HTA wrote nothing: no launch ↔ GPU pair (CPU-only, MTIA inference ...): None, as HTA returns
        assert mine is None or mine.empty
        return
    gold = pd.read_csv(f)
    ranks = _ranks(meta, "queue_length_summary")
    quirky = ta.get_queue_length_summary(ranks=ranks, hta_compat=True)
    _compare(_flat(quirky, "queue_length"), gold, ["rank", "stream"])
    # fixed order of equal times (+1 before -1): same points, same extremes; only transient values at ties move
    fixed, hta = _flat(mine, "queue_length"), _flat(quirky, "queue_length")
    assert fixed[["rank", "stream"]].values.tolist() == hta[["rank", "stream"]].values.tolist()
    for stat in ("count", "max"):
        np.testing.assert_array_equal(fixed[f"queue_length|{stat}"], hta[f"queue_length|{stat}"])
    # and never a negative value on any corpus job
    series = ta.get_queue_length_time_series(ranks=ranks)
    assert all((df["queue_length"] >= 0).all() for df in series.values())


def test_memory_bw_summary(job):
    name, ta, golden, meta = job
    f = golden / "memory_bw_summary.csv"
    ranks = _ranks(meta, "memory_bw_summary")
    mine = ta.get_memory_bw_summary(ranks=ranks)
    if not f.exists():
        assert mine is None or mine.empty
        return
    try:
        gold = pd.read_csv(f)
    except pd.errors.EmptyDataError:
        gold = pd.DataFrame()
    if gold.empty:
        assert mine is None or mine.empty
        return
    quirky = ta.get_memory_bw_summary(ranks=ranks, hta_compat=True)
    _compare(_flat(quirky, "memory_bw_gbps"), gold, ["rank", "name"])
    fixed = _flat(mine, "memory_bw_gbps")
    hta = _flat(quirky, "memory_bw_gbps")
    if len(fixed) == len(hta) and np.allclose(fixed["memory_bw_gbps|count"], hta["memory_bw_gbps|count"]):
        _compare(fixed, gold, ["rank", "name"])
    else:
        # documented differences: the fix drops residue samples (below 1e-9 GB/s) and orders ends before starts
        # at equal times, so a point HTA leaves positive is not positive under the fix only if it is residue or
        # shares its time (and kind) with another point
        series = ta.get_memory_bw_time_series(ranks=ranks, hta_compat=True)
        for r, df in series.items():
            pos = df["memory_bw_gbps"] > 0
            clean = ta.get_memory_bw_time_series(ranks=[r])[r]["memory_bw_gbps"] > 0
            tied = df.duplicated(["name", "ts"], keep=False)
            dropped = df.loc[pos & ~clean.reindex(df.index) & ~tied, "memory_bw_gbps"]  # the same points, by id
            assert (dropped.abs() < 1e-9).all()
        assert (fixed["memory_bw_gbps|count"].to_numpy() <= hta["memory_bw_gbps|count"].to_numpy()).all()


def test_time_blocked_on_full_queue(job):
    name, ta, golden, meta = job
    f = golden / "time_blocked_on_full_queue.csv"
    if not f.exists():
        pytest.skip("no reference output")
    gold = pd.read_csv(f)
    series = ta.get_queue_length_time_series(ranks=_ranks(meta, "queue_length_summary"))
    mine = ta.get_time_spent_blocked_on_full_queue(series, hta_compat=True)
    assert list(mine.columns) == list(gold.columns)
    if gold.empty:
        assert mine.empty
    else:
        _compare(mine, gold, ["rank", "stream"])


def test_cupti_counter_data(job):
    name, ta, golden, meta = job
    f = golden / "cupti_counter_data.csv"
    frames = ta.get_cupti_counter_data_with_operators(ranks=meta.get("params", {}).get("ranks") or [0])
    if not f.exists():
        assert frames == []
        return
    gold = pd.read_csv(f, keep_default_na=False)
    mine = pd.concat([df.assign(rank=r) for r, df in zip(meta["params"]["ranks"], frames)], ignore_index=True)
    assert set(gold.columns) <= set(mine.columns)
    a = mine.sort_values("index", ignore_index=True)
    b = gold.sort_values("index", ignore_index=True)
    assert len(a) == len(b)
    counters = [c for c in b.columns if c.startswith("smsp__")]
    assert counters
    for c in ["index", "index_runtime", "ts", *counters]:
        assert a[c].astype(np.int64).tolist() == b[c].astype(np.int64).tolist(), c
    np.testing.assert_allclose(a["dur"].to_numpy(float), b["dur"].to_numpy(float), rtol=RTOL)
    for c in ["name", "cat", "top_level_op", "bottom_level_op"]:
        assert a[c].astype(str).tolist() == b[c].astype(str).tolist(), c
    assert [str(list(s)) for s in a["op_stack"]] == b["op_stack"].tolist()
