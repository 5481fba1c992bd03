"""HTA's trace filters on the facade's frames (spec 12 §3-4 verified counts on hta_trace_filter_2rank rank 0),
the fixes, and holotrace's filtered job view."""

from __future__ import annotations

import numpy as np
import pytest

from corpus import shared_or_skip
from holotrace.errors import AnalysisError


@pytest.fixture(scope="module")
def frame():
    from holotrace import TraceAnalysis

    shared = shared_or_skip()
    a = TraceAnalysis(trace_dir=str(shared / "traces" / "hta_trace_filter_2rank"), cache=False)
    return a, a._table(0)


def test_spec_counts(frame):
    from holotrace import (
        CompositeFilter,
        CPUOperatorFilter,
        GPUKernelFilter,
        IterationIndexFilter,
        MemCopyEventFilter,
        NameFilter,
        TimeRangeFilter,
    )

    _, df = frame
    assert len(df) == 2403
    assert len(NameFilter("aten::.*mm")(df)) == 189
    assert len(NameFilter("mm")(df)) == 0  # anchored at the start
    assert len(GPUKernelFilter()(df)) == 602 and len(CPUOperatorFilter()(df)) == 1801
    assert len(TimeRangeFilter((0, 100000))(df)) == 574
    assert len(MemCopyEventFilter("Memcpy DtoD (Device -> Device)")(df)) == 4
    assert len(CompositeFilter([IterationIndexFilter(0), GPUKernelFilter(), NameFilter("^nccl")])(df)) == 5


def test_fixes(frame):
    from holotrace import CompositeFilter, IterationFilter, QueryFilter, RankFilter, TimeRangeFilter, ZeroDurationFilter

    _, df = frame
    assert len(TimeRangeFilter((np.int64(0), np.int64(100000)))(df)) == 574  # numpy integers accepted
    with pytest.raises(ValueError):
        TimeRangeFilter((5, 1))
    empty = IterationFilter(12345)(df)
    assert empty.empty and list(empty.columns) == list(df.columns)  # empty keeps its columns
    both = CompositeFilter([QueryFilter("dur > 100"), ZeroDurationFilter])(df)  # QueryFilter composes
    assert len(both) == int((df["dur"] > 100).sum())
    assert RankFilter(0)(df) is df  # HTA: no rank column, input unchanged (with a warning)
    with pytest.raises(AnalysisError, match="no rank column"):
        RankFilter(0, strict=True)(df)
    with pytest.raises(TypeError):
        IterationFilter("551")


def test_operator_filters_work_on_loaded_frames(frame):
    from holotrace import AfterOperatorFilter, BeforeOperatorFilter, UnderOperatorFilter

    _, df = frame
    first_mm = df[df["s_name"] == "aten::mm"].sort_values("ts").iloc[0]
    under = UnderOperatorFilter("aten::mm", 0)(df)
    assert (under["ts"] >= first_mm["ts"]).all() and (under["end"] <= first_mm["ts"] + first_mm["dur"]).all()
    assert (under["stream"] == -1).all() and len(under) >= 1
    after, before = AfterOperatorFilter("aten::mm", 0)(df), BeforeOperatorFilter("aten::mm", 0)(df)
    assert len(after) > 0 and len(before) > 0  # HTA returns none on loaded frames (absolute end vs aligned ts)
    with_k = UnderOperatorFilter("aten::mm", 0, include_gpu_kernels=True)(df)
    assert len(with_k) > len(under) and (with_k["stream"] != -1).any()


def test_native_filtered_view(frame):
    from holotrace.analysis import steps, temporal
    from holotrace.model.filter import TraceFilter, filter_job, filter_view, parse_int_ranges

    a, _ = frame
    job = a.job
    v = filter_view(job, steps=(551,), ranks="1")
    assert v.ranks == [1]
    assert set(np.unique(v[1]["iteration"]).tolist()) == {551}
    assert steps.profiler_steps(v) == [551]
    tb = temporal.breakdown(v)  # every analysis takes the filtered view
    assert list(tb["rank"]) == [1]
    nccl = filter_view(job, names="^nccl", ranks=[0])
    names = set(job.strings.decode(np.unique(nccl[0]["name"])))
    assert names and all(n.startswith("nccl") or "Launch" in n or n.startswith("cuda") for n in names)
    sub = filter_job(job, TraceFilter(ranks=(0,), steps=(552,)))
    assert sub.ranks == [0] and set(np.unique(sub.rank(0).columns["iteration"]).tolist()) == {552}
    p = sub.rank(0).columns["partner"]
    linked = np.flatnonzero(p >= 0)
    assert (p[p[linked]] == linked).all()  # links renumbered both ways
    assert parse_int_ranges("0-3,7") == (0, 1, 2, 3, 7)
    with pytest.raises(AnalysisError):
        parse_int_ranges("3-1")
