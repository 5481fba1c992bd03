"""The per-rank analyses' Table cores: importable without pandas, and the public frames are exactly their tables."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import holotrace
from holotrace.analysis import idle, kernels, launches, overlap, steps, temporal, topk
from holotrace.model.classify import HTA, NATIVE
from holotrace.model.view import job_view
from holotrace.table import Table

JOB = Path(__file__).resolve().parents[1] / "data" / "traces" / "hta_trace_filter_2rank"
MODULES = [
    "temporal",
    "overlap",
    "steps",
    "idle",
    "kernels",
    "launches",
    "topk",
    "endpoint_order",
    "callstack",
    "classification",
    "grouped",
]


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_without_pandas(module):
    code = f"import sys, holotrace.analysis.{module}; assert 'pandas' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def job():
    return holotrace.load(str(JOB))


def _same(table: Table, frame) -> None:
    """The frame holds the table's columns: same names, same values (float bits; text as text), a RangeIndex."""
    assert isinstance(table, Table)
    assert list(frame.columns) == table.columns and len(frame) == len(table)
    assert type(frame.index).__name__ == "RangeIndex" and frame.index.tolist() == list(range(len(table)))
    for c in table.columns:
        a, b = table[c], frame[c].to_numpy()
        if a.dtype.kind == "f":
            assert a.dtype == b.dtype and np.array_equal(a.view(np.int64), b.view(np.int64)), c
        else:
            assert a.tolist() == b.tolist(), c


CORES = {
    "temporal": (temporal.breakdown_table, temporal.breakdown, {}),
    "temporal_step": (temporal.breakdown_table, temporal.breakdown, {"per_step": True}),
    "overlap": (overlap.comm_comp_overlap_table, overlap.comm_comp_overlap, {}),
    "steps": (steps.step_times_table, steps.step_times, {}),
    "idle": (idle.idle_breakdown_table, idle.idle_breakdown, {}),
    "idle_stats": (idle.idle_interval_stats_table, idle.idle_interval_stats, {}),
    "types": (kernels.type_breakdown_table, kernels.type_breakdown, {}),
    "types_rank": (kernels.type_breakdown_table, kernels.type_breakdown, {"by_rank": True}),
    "kernel_stats": (kernels.kernel_stats_table, kernels.kernel_stats, {}),
    "distribution": (kernels.rank_distribution_table, kernels.rank_distribution, {"top": 50}),
    "top_kernels": (kernels.top_kernels_table, kernels.top_kernels, {}),
}


@pytest.mark.parametrize("rules", [NATIVE, HTA], ids=["native", "hta"])
@pytest.mark.parametrize("name", list(CORES))
def test_public_frames_are_the_tables(job, name, rules):
    core, public, kw = CORES[name]
    table = core(job, rules=rules, **kw)
    assert len(table) > 0
    _same(table, public(job, rules=rules, **kw))


def test_launch_tables(job):
    view = job_view(job, NATIVE)
    stats = launches.launch_stats_table(view, details=True, launch_delay_cutoff=5)
    frames = launches.launch_stats(view, details=True, launch_delay_cutoff=5)
    for r in stats:
        _same(stats[r], frames[r])
    _same(launches.launch_summary_table(stats), launches.launch_summary(frames))
    every = launches.all_launches_table(stats)
    _same(every, launches.all_launches(frames))
    worst = launches.worst_launches_table(every, "launch_delay", "launch_delay_outlier", 4)
    assert len(worst) == 4 and (np.diff(worst["launch_delay"]) <= 0).all()
    assert launches.delay_overview(every) == launches.delay_overview(launches.all_launches(frames))
    r = view.ranks[0]
    got = launches.rank_launches_table(view, r, top=3, launch_delay_cutoff=5)
    rows, worst = launches.rank_launches(view, r, top=3, launch_delay_cutoff=5)
    _same(got.rows, rows)
    assert worst.index.tolist() == got.worst_rows.tolist() and len(got.worst_rows) == 3
    assert got.worst["launch_delay"].tolist() == stats[r]["launch_delay"][got.worst_rows].tolist()


def test_idle_by_rank_table_of_a_table_or_a_frame(job):
    b = idle.idle_breakdown_table(job)
    t = idle.idle_by_rank_table(b)
    _same(t, idle.idle_by_rank(b.to_pandas(object_text=True)))
    assert np.allclose(t["idle_us"], [b["idle_us"][b["rank"] == r].sum() for r in t["rank"]])


def test_top_k_table_is_the_frame():
    names = np.array(["b", "a", "c", "a", None, "b", "d"] * 20, dtype=object)
    dur = np.arange(len(names), dtype=np.float64) % 5 + 1.0
    for rules in (NATIVE, HTA):
        _same(topk.top_k_table(names, dur, 2, 0.5, rules=rules), topk.top_k(names, dur, 2, 0.5, rules=rules))
    t = topk.name_stats_table(names, dur)
    assert "None" not in t["name"].tolist() and None not in t["name"].tolist()  # a missing name is no group
    _same(t, topk.name_stats(names, dur))
