"""One view per job, rule set and filter: every analysis of a command reads the view built once."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

import holotrace
from holotrace.cli import main
from holotrace.model import view as view_mod
from holotrace.model.classify import HTA, HTA_FIXED, NATIVE
from tracebuilder import TraceBuilder


def _job(tmp_path: Path) -> Path:
    """Two ranks, two steps each, a kernel and an all-reduce per step."""
    folder = tmp_path / "job"
    folder.mkdir()
    for r in range(2):
        tb = TraceBuilder(rank=r, world_size=2)
        for i, t0 in enumerate((0, 1000)):
            tb.annotation(f"ProfilerStep#{10 + i}", t0, 900)
            tb.launch_kernel("gemm_kernel", t0 + 10, 5, t0 + 20, 300 + 100 * r)
            tb.launch_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 30, 5, t0 + 450, 200)
        tb.write(folder / f"rank-{r}.json")
    return folder


@pytest.fixture
def builds(monkeypatch):
    """The views built (rule set name, ranks) while the test runs."""
    seen = []
    real = view_mod.build_view

    def counting(job, rules=NATIVE, *, ranks=None, include_last_step=False):
        seen.append((rules.name, None if ranks is None else tuple(ranks)))
        return real(job, rules, ranks=ranks, include_last_step=include_last_step)

    monkeypatch.setattr(view_mod, "build_view", counting)
    return seen


def _run(*argv) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(list(map(str, argv))) == 0


def test_summary_builds_one_view(tmp_path, builds):
    _run("summary", _job(tmp_path), "--no-cache", "--quiet")
    assert builds == [(NATIVE.name, None)]


def test_report_builds_one_view(tmp_path, builds):
    _run("report", _job(tmp_path), "--no-cache", "--quiet", "-o", tmp_path / "r.html")
    assert builds == [(NATIVE.name, None)]


def test_a_filter_builds_one_view_for_the_filter_and_one_for_the_filtered_job(tmp_path, builds):
    _run("summary", _job(tmp_path), "--no-cache", "--quiet", "--steps", "11")
    assert len(builds) == 2 and {b[0] for b in builds} == {NATIVE.name}


def test_resolve_keeps_the_view_on_the_job_and_knows_its_rules(tmp_path, builds):
    job = holotrace.load(_job(tmp_path), cache=False, progress_bar=False)
    native = view_mod.resolve(job)
    assert native.rules is NATIVE and view_mod.resolve(job, NATIVE) is native
    one = view_mod.resolve(job, NATIVE, ranks=[1])  # taken from the full view: no build
    assert one.ranks == [1] and one[1] is native[1]
    hta = view_mod.resolve(job, HTA)
    fixed = view_mod.resolve(hta, HTA_FIXED)  # same columns, other rules: relabelled, not rebuilt
    assert fixed.rules is HTA_FIXED and fixed[0] is hta[0] and view_mod.resolve(hta) is hta
    assert builds == [(NATIVE.name, None), (HTA.name, None)]
    assert view_mod.resolve(hta, NATIVE).rules is NATIVE  # the rules asked for are the ones applied
    job.forget_views()
    view_mod.resolve(job)
    assert len(builds) == 3
