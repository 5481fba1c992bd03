"""The HTA-compatible facade against HTA 0.6.1's outputs: temporal, kernel, idle-time and overlap
breakdowns and profiler steps, for every job with reference outputs (bundled tests/data and, when
present, the shared corpus beside the repository).

Values must match within 1e-6 relative; columns exactly. HTA's golden files are written with rows
sorted, so rows are compared after sorting by the key columns (the row order of the facade itself is
asserted in the unit tests). Documented differences (docs/compatibility.md) are asserted explicitly:

* kernel-type rows with ``sum == 0`` — HTA's tie artefact, never produced by holotrace;
* idle time where HTA took ``index_correlation == 0`` for the event with index 0 — fixed by default;
  the opt-in ``index_zero_quirk`` reproduces HTA exactly;
* where HTA raised (``errors.json``), holotrace returns a well-formed result.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from corpus import golden_jobs
from holotrace import TraceAnalysis

# jobs where HTA's index-0 lookup changes the idle categories (spec 21 §5; docs/compatibility.md)
IDLE_INDEX_ZERO_JOBS = {"tracelens_h100_qwen15_05b", "tracelens_mi300_qwen15_05b"}

RTOL = 1e-6


def _golden_dir(golden: Path) -> Path | None:
    """The folder with the reference outputs: the pandas-2 run where HTA could not load under pandas 3."""
    meta = json.loads((golden / "meta.json").read_text())
    if meta.get("status", {}).get("load") == "error" and (golden / "pandas2" / "meta.json").exists():
        return golden / "pandas2"
    return golden if meta.get("rank_map") else None


def _jobs():
    out = []
    for name, traces, golden in golden_jobs():
        if not (golden / "meta.json").exists():
            continue
        g = _golden_dir(golden)
        if g is not None:
            out.append((name, traces, g))
    return out


JOBS = _jobs()


@pytest.fixture(scope="module", params=JOBS, ids=[j[0] for j in JOBS])
def case(request):
    name, traces, golden = request.param
    meta = json.loads((golden / "meta.json").read_text())
    errors = json.loads((golden / "errors.json").read_text()) if (golden / "errors.json").exists() else {}
    rank_map = {int(r): f for r, f in meta["rank_map"].items()}
    ta = TraceAnalysis(trace_files=rank_map, trace_dir=str(traces), cache=False)
    return name, ta, golden, meta, errors


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def _same(mine: pd.DataFrame, gold: pd.DataFrame, keys: list[str]) -> None:
    assert list(mine.columns) == list(gold.columns)
    a = mine.sort_values(keys, kind="stable", ignore_index=True)
    b = gold.sort_values(keys, kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False, rtol=RTOL, check_index_type=False)


def _golden_or_error(golden: Path, errors: dict, file: str, key: str):
    f = golden / file
    if f.exists():
        return _read(f)
    if key in errors or "load" in errors:
        return None  # HTA raised: the test checks that holotrace gives a well-formed result instead
    pytest.skip(f"HTA wrote no {file} for this job")


def test_temporal_breakdown(case):
    name, ta, golden, meta, errors = case
    mine = ta.get_temporal_breakdown()
    gold = _golden_or_error(golden, errors, "temporal_breakdown.csv", "temporal_breakdown")
    if gold is not None:
        _same(mine, gold, ["rank"])
        return
    # HTA raised (no GPU activity, or rounding left negative durations): a row per rank, no negative time
    assert mine["rank"].tolist() == ta.job.ranks
    times = mine.iloc[:, 1:5].to_numpy()
    assert (times >= 0).all()
    for _, row in mine.iterrows():
        if row["kernel_time(us)"] > 0:
            assert abs(row["idle_time_pctg"] + row["compute_time_pctg"] + row["non_compute_time_pctg"] - 100) <= 0.02
        else:
            assert math.isnan(row["idle_time_pctg"])


@pytest.mark.parametrize("suffix", ["", "_all"])
def test_gpu_kernel_breakdown(case, suffix):
    name, ta, golden, meta, errors = case
    kw = {}
    if suffix:
        p = meta.get("params", {}).get("kernel_breakdown_all", {})
        kw = dict(duration_ratio=p.get("duration_ratio", 1.0), num_kernels=p.get("num_kernels", 10**9))
    types, kernels = ta.get_gpu_kernel_breakdown(**kw)
    gtypes = _golden_or_error(golden, errors, f"kernel_type_breakdown{suffix}.csv", "kernel_breakdown")
    gkern = _golden_or_error(golden, errors, f"kernel_breakdown{suffix}.csv", "kernel_breakdown")
    if gtypes is None or gkern is None:
        assert list(kernels.columns) == [
            "name",
            "sum (us)",
            "max (us)",
            "min (us)",
            "stddev",
            "mean (us)",
            "kernel_type",
            "rank",
        ]
        assert set(kernels["rank"]) <= set(ta.job.ranks) and (kernels["sum (us)"] >= 0).all()
        assert types["percentage"].sum() == pytest.approx(100, abs=0.5) if len(types) else True
        return
    # documented difference: HTA's zero-length tie segments can add `sum == 0` rows; holotrace never does
    zero = gtypes[gtypes["sum"] == 0]
    assert (zero["percentage"] == 0).all()
    assert not set(zero["kernel_type"]) & set(types["kernel_type"])
    _same(types, gtypes[gtypes["sum"] != 0].reset_index(drop=True), ["kernel_type"])
    _same(kernels, gkern, ["kernel_type", "name", "rank"])


def test_idle_time_breakdown(case):
    name, ta, golden, meta, errors = case
    ranks = meta.get("params", {}).get("idle_time_breakdown", {}).get("ranks") or [0]
    ranks = [r for r in ranks if r in ta.job.traces] or ta.job.ranks[:1]
    idle, stats = ta.get_idle_time_breakdown(ranks=ranks, show_idle_interval_stats=True)
    plain, none = ta.get_idle_time_breakdown(ranks=ranks)
    assert none is None
    pd.testing.assert_frame_equal(plain, idle)
    gold = _golden_or_error(golden, errors, "idle_time_breakdown.csv", "idle_time_breakdown")
    if gold is None:
        # HTA: "No objects to concatenate" on ranks without GPU kernels; holotrace: empty, well-formed frames
        assert list(idle.columns) == ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]
        assert len(stats) == len(idle)
        if "load" not in errors:
            assert idle.empty
        return
    gstats = _read(golden / "idle_interval_stats.csv")
    keys = ["rank", "stream", "idle_category"]
    pd.testing.assert_frame_equal(gold, _read(golden / "idle_time_breakdown_with_stats.csv"))
    mine_stats = stats.reset_index()
    if name in IDLE_INDEX_ZERO_JOBS:
        # documented difference: only the host-wait / kernel-wait split moves; the quirk reproduces HTA
        quirky = TraceAnalysis(job=ta.job, hta_compat=True)
        q_idle, q_stats = quirky.get_idle_time_breakdown(ranks=ranks, show_idle_interval_stats=True)
        _same(q_idle, gold, keys)
        _same(q_stats.reset_index(), gstats, keys)
        merged = idle.merge(gold, on=keys, suffixes=("", "_hta"))
        moved = merged[~np.isclose(merged["idle_time"], merged["idle_time_hta"])]
        assert len(moved) and set(moved["idle_category"]) <= {"host_wait", "kernel_wait"}
        per_stream = merged.groupby(["rank", "stream"])[["idle_time", "idle_time_hta"]].sum()
        np.testing.assert_allclose(per_stream["idle_time"], per_stream["idle_time_hta"], rtol=RTOL)
        return
    _same(idle, gold, keys)
    _same(mine_stats, gstats, keys)


def test_comm_comp_overlap(case):
    name, ta, golden, meta, errors = case
    mine = ta.get_comm_comp_overlap()
    gold = _golden_or_error(golden, errors, "comm_comp_overlap.csv", "comm_comp_overlap")
    if gold is None:
        assert mine["rank"].tolist() == ta.job.ranks
        v = mine["comp_comm_overlap_pctg"].dropna()
        assert ((v >= 0) & (v <= 100)).all()
        return
    _same(mine, gold, ["rank"])


def test_profiler_steps(case):
    name, ta, golden, meta, errors = case
    gold = _golden_or_error(golden, errors, "profiler_steps.csv", "profiler_steps")
    if gold is None:
        assert ta.get_profiler_steps() == sorted(set(ta.get_profiler_steps()))
        return
    assert ta.get_profiler_steps() == [int(x) for x in gold["profiler_step"].tolist()]


def test_results_do_not_depend_on_call_order(case):
    """Analyses never mutate the shared tables: a second call returns the same frames."""
    name, ta, golden, meta, errors = case
    first = ta.get_temporal_breakdown()
    ta.get_gpu_kernel_breakdown()
    ta.get_idle_time_breakdown(ranks=ta.job.ranks[:1], show_idle_interval_stats=True)
    pd.testing.assert_frame_equal(first, ta.get_temporal_breakdown())
