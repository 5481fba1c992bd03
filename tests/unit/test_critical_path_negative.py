"""Negative edge weights (a kernel stamped before the previous one on its stream ends): zeroed for the path,
counted in the result, logged once per graph — a warning only when a zeroed edge is on the path."""

from __future__ import annotations

import logging

import pytest

import holotrace
from holotrace.analysis.critical_path import per_step
from holotrace.analysis.critical_path.what_if import what_if
from tracebuilder import TraceBuilder


def _job(tmp_path, cpu_tail_us: float):
    tb = TraceBuilder()
    tb.annotation("ProfilerStep#1", 0, 1000)
    tb.cpu_op("aten::mm", 10, 10)
    tb.launch_kernel("gemm", 12, 2, 20, 10)
    tb.launch_kernel("gemm2", 15, 2, 28, 7)  # starts 2 us before the first one ends: kernel-kernel edge of -2 us
    tb.cpu_op("aten::add", 40, cpu_tail_us)
    tb.write(tmp_path / f"tail{cpu_tail_us}")
    return holotrace.load(str(tmp_path / f"tail{cpu_tail_us}"), cache=False)


def _records(caplog):
    return [r for r in caplog.records if "negative edge weight" in r.getMessage()]


@pytest.mark.parametrize(
    "tail,on_path,level,length", [(5.0, 1, logging.INFO, 17_000.0), (500.0, 0, logging.DEBUG, 510_000.0)]
)
def test_zeroed_weights_counted_and_logged_once(tmp_path, caplog, tail, on_path, level, length):
    job = _job(tmp_path, tail)
    caplog.set_level(logging.DEBUG, logger="holotrace.critical_path")
    paths = {}
    df = per_step(job, rank=0, paths=paths)
    cp = paths[1]
    assert (cp.zeroed_edges, cp.zeroed_on_path) == (1, on_path)
    assert cp.length == length
    assert set(df.zeroed_edges) == {1}
    recs = _records(caplog)
    assert len(recs) == 1 and recs[0].levelno == level
    assert "1 negative edge weight(s) set to 0 (%d on the path)" % on_path in recs[0].getMessage()  # noqa: UP031
    caplog.clear()
    # what-if re-times the graph once per fix: still one message for the step's graph
    wi = what_if(job, rank=0)
    assert len(wi) >= 2
    assert len(_records(caplog)) == 1
