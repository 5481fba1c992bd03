"""One job graph and one replay per command: what the summary's costliest rank computes, the fix list reuses.

The three-rank job of ``test_job_replay`` (rank 2's GEMM takes 300 us, the others' 100 us; by hand, rank 2 at the
median saves 200 us of the 370 us step).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_job_replay import _job

import holotrace
from holotrace.analysis.critical_path.advice import costliest_rank, job_advice
from holotrace.analysis.critical_path.job_graph import build_job_graph, release_job_graph
from holotrace.analysis.critical_path.replay import base_delays, replay, shared_base, solve
from holotrace.model.view import job_view


@pytest.fixture()
def folder(tmp_path):
    _job(tmp_path)
    return tmp_path


def test_one_graph_per_view(folder):
    job = holotrace.load(str(folder), cache=False)
    g = build_job_graph(job)
    assert build_job_graph(job) is g and build_job_graph(job_view(job)) is g
    assert replay(g) is replay(g)  # the unmodified replay is kept on the graph
    part = build_job_graph(job, ranks=[0, 1])
    assert part is not g and sorted(set(part.node_rank[part.node_rank >= 0].tolist())) == [0, 1]
    release_job_graph(job)  # let go: the next one is built again, the same
    again = build_job_graph(job)
    assert again is not g and np.array_equal(again.point_time, g.point_time) and build_job_graph(job) is again
    assert build_job_graph(job, ranks=[0, 1]) is part  # another ranks' graph is kept


def test_costliest_then_advice_equals_advice_alone(folder):
    shared = holotrace.load(str(folder), cache=False)
    c = costliest_rank(shared)
    assert c.rank == 2 and c.saving_ms == pytest.approx(0.2)
    after = job_advice(shared)
    alone = job_advice(holotrace.load(str(folder), cache=False))
    assert after.graph is build_job_graph(shared) and alone.graph is not after.graph
    cols = ["fix", "rank", "target", "step", "saving_ms"]
    assert after.per_step[cols].equals(alone.per_step[cols])
    assert after.costliest == alone.costliest == c
    strag = after.per_step[after.per_step["fix"] == "straggler"]
    assert strag["saving_ms"].max() == pytest.approx(0.2)


def test_sweep_and_passes_agree(folder):
    """The compiled sweep and the passes (any window size: a schedule, not a rule) give the same times."""
    g = build_job_graph(holotrace.load(str(folder), cache=False))
    d = base_delays(g)
    whole, _ = solve(g, d)
    assert whole[2 * np.flatnonzero(g.node_type == 4)[0]] == 320_000.0  # the arrival, as measured
    for w in (1, 2, 3, 7, 10**9):
        t, _ = solve(g, d, window_points=w, passes=True)
        assert np.array_equal(np.isfinite(t), np.isfinite(whole))
        assert np.allclose(t[np.isfinite(t)], whole[np.isfinite(whole)], rtol=0, atol=0.5)
    # edits work on copies: the shared base is never changed by a what-if
    b = shared_base(g)
    before = b.chain.copy()
    job_advice(g.view)
    assert np.array_equal(shared_base(g).chain, before)


def test_without_the_compiled_sweep(folder, monkeypatch):
    """A checkout without the built extension replays by passes, to the same step times."""
    from holotrace.analysis.critical_path import replay as replay_mod

    job = holotrace.load(str(folder), cache=False)
    with_sweep = job_advice(job).per_step
    monkeypatch.setattr(replay_mod, "_sweep", None)
    without = job_advice(holotrace.load(str(folder), cache=False)).per_step
    assert np.allclose(with_sweep["saving_ms"], without["saving_ms"], rtol=0, atol=1e-9)
    assert with_sweep["fix"].tolist() == without["fix"].tolist()


def test_narrow_and_wide_indices_agree(folder, monkeypatch):
    """The compiled replay with int32 topology indices gives the times int64 ones give (and the first replay, settled
    by the sweep that orders the points, the times of a later one)."""
    from holotrace.analysis.critical_path import replay as replay_mod

    if replay_mod._sweep is None:
        pytest.skip("the compiled replay is not built")
    times = {}
    narrow_built, graph_built = replay_mod._NARROW, replay_mod._GRAPH_NARROW
    for narrow in (True, False):
        for graph_arrays in (True, False):  # the sweep reads the graph's int32 arrays as they are, or int64 copies
            monkeypatch.setattr(replay_mod, "_NARROW", narrow and narrow_built)
            monkeypatch.setattr(replay_mod, "_GRAPH_NARROW", graph_arrays and graph_built)
            g = build_job_graph(holotrace.load(str(folder), cache=False))
            first, _ = solve(g, shared_base(g))  # the sweep's own times
            again, _ = solve(g, shared_base(g).copy())  # the relax over the kept topology
            top = replay_mod._topology(g)
            assert top.topo.dtype == (np.int32 if narrow and narrow_built else np.int64)
            assert top.order.dtype == (g.chain_order.dtype if graph_arrays and graph_built else np.int64)
            assert np.array_equal(first, again)
            times[narrow, graph_arrays] = again
    for t in times.values():
        assert np.array_equal(t, times[True, True])


def test_cpu_parents_are_the_call_graphs():
    """The parents the what-ifs read (nesting only) are the call graph's, on every CPU row of a real trace."""
    from corpus import DATA
    from holotrace.analysis.callstack import call_graph, cpu_parents
    from holotrace.model.classify import CPU_KINDS

    view = job_view(holotrace.load(str(DATA / "traces" / "hta_trace_filter_2rank"), cache=False))
    for r in view.ranks:
        cpu = np.isin(view[r]["kind"], [int(k) for k in CPU_KINDS])
        want = call_graph(view, r, link_backward=False).parent
        got = cpu_parents(view, r)
        assert cpu.sum() > 1000 and (want[cpu] >= 0).any()
        assert np.array_equal(got[cpu], want[cpu])


def test_replays_on_threads_equal_one_by_one(folder, monkeypatch):
    """The fixes' replays, run on threads, give the times one by one gives, in the order of the fixes."""
    from holotrace.analysis.critical_path import fix_replays
    from holotrace.analysis.critical_path import job_what_if as jw
    from holotrace.exec import pool

    g = build_job_graph(holotrace.load(str(folder), cache=False))
    base = shared_base(g)
    replay(g, base)
    tries = [[c] for c in jw.candidates(g, base, jw.node_info(g), jw.WhatIfOptions())]
    assert len(tries) > 2
    one_by_one = [jw.replay_times(g, jw.apply(base, t)) for t in tries]
    monkeypatch.setattr(pool, "cpu_count", lambda: 4)
    monkeypatch.setattr(fix_replays, "_spare_cores", lambda: 2)
    monkeypatch.setattr(fix_replays.FixReplays, "MAX_THREADS", 3)  # two workers and this thread
    monkeypatch.setattr(fix_replays.FixReplays, "MIN_TRIES", 1)
    on_threads = jw.replays(g, base, tries)
    assert len(on_threads) == len(one_by_one)
    for (s1, t1), (s2, t2) in zip(on_threads, one_by_one):
        assert np.array_equal(s1, s2) and np.array_equal(t1, t2)


def test_relax_of_a_build_before_relax_topo(folder, monkeypatch):
    """A compiled replay built before ``relax_topo`` replays by ``relax``: the same times."""
    from holotrace.analysis.critical_path import job_what_if as jw
    from holotrace.analysis.critical_path import replay as replay_mod

    if replay_mod._relax_topo is None:
        pytest.skip("the compiled replay is not built")
    g = build_job_graph(holotrace.load(str(folder), cache=False))
    base = shared_base(g)
    replay(g, base)
    tries = [[c] for c in jw.candidates(g, base, jw.node_info(g), jw.WhatIfOptions())]
    tries.append([c for t in tries for c in t])  # every edit at once (host synchronisation dropped too)
    now = [solve(g, jw.apply(base, t))[0] for t in tries]
    monkeypatch.setattr(replay_mod, "_relax_topo", None)
    for t, want in zip(tries, now):
        assert np.array_equal(solve(g, jw.apply(base, t))[0], want)


def test_relax_topo_checks_its_indices(folder):
    """The compiled relax over the topological layout refuses an index out of range or not before its point."""
    from holotrace.analysis.critical_path import replay as replay_mod

    if replay_mod._relax_topo is None:
        pytest.skip("the compiled replay is not built")
    g = build_job_graph(holotrace.load(str(folder), cache=False))
    d = shared_base(g)
    replay(g, d)
    top = replay_mod._topology(g)
    args = [top.topo, top.prev, top.cpos, top.fixed, top.measured, top.head, top.esrc, top.eidx, d.chain, d.cross]
    v = np.empty(len(g.point_time))
    replay_mod._relax_topo(*args, v)
    assert np.array_equal(v, solve(g, d)[0])
    for i, bad in ((1, len(top.prev) - 1), (2, len(top.cpos)), (6, len(top.topo) - 1)):
        a = [x.copy() for x in args]
        if not len(a[i]):
            continue
        a[i][-1 if i != 6 else 0] = bad
        with pytest.raises(ValueError):
            replay_mod._relax_topo(*a, np.empty(len(g.point_time)))


def test_compiled_layout_equals_numpy(folder, monkeypatch):
    """The topological layout the replays read: the compiled one is numpy's, array for array."""
    from holotrace.analysis.critical_path import replay as replay_mod

    if replay_mod._topo_layout is None:
        pytest.skip("the compiled replay is not built")
    g = build_job_graph(holotrace.load(str(folder), cache=False))
    replay(g)
    top = replay_mod._topology(g)
    i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    has_in = np.zeros(len(g.point_time), dtype=bool)
    has_in[g.dst] = True
    args = (top.topo, top.order, top.first, top.first & ~has_in[top.order], i64(g.src), i64(g.dst))
    compiled = replay_mod._layout(*args)
    monkeypatch.setattr(replay_mod, "_topo_layout", None)
    for a, b in zip(compiled, replay_mod._layout(*args)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    with pytest.raises(ValueError):  # not a permutation
        bad = top.topo.copy()
        bad[0] = bad[1]
        monkeypatch.undo()
        replay_mod._layout(bad, *args[1:])


SINGLE_RANK = ["hta_cpu_only", "hta_amd_mi250", "hta_critical_path_cuda_event_sync", "kineto_h100_cuda_sync_small"]


@pytest.mark.parametrize("name", SINGLE_RANK)
def test_one_rank_answered_without_a_replay(name):
    """A one-rank job: the costliest rank is that rank, as the replay would say, and no graph is built for it."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "data" / "traces" / name
    job = holotrace.load(str(folder), cache=False)
    assert len(job.ranks) == 1
    c = costliest_rank(job)
    view = job_view(job)
    assert view.derived(("job_graph", tuple(view.ranks)), lambda: None) is None  # (nothing kept: none built)
    assert c == job_advice(holotrace.load(str(folder), cache=False), only=("straggler",)).costliest


@pytest.mark.parametrize("cores", [1, 2, 4])
def test_advice_whatever_the_threads(folder, monkeypatch, cores):
    """The unmodified replay on a worker beside the making of the candidates, the tries shared at the end (two
    cores or more), or everything on this thread (one): the same fix table and replayed steps."""
    from holotrace.analysis.critical_path import fix_replays
    from holotrace.exec import pool

    def advice_with(n: int):
        monkeypatch.setattr(pool, "cpu_count", lambda: n)
        monkeypatch.setattr(fix_replays, "_spare_cores", lambda: max(0, n - 1))
        a = job_advice(holotrace.load(str(folder), cache=False), combine=[["straggler", "communication"]])
        return a.step_savings, a.replay_table

    monkeypatch.setattr(fix_replays.FixReplays, "MIN_TRIES", 1)
    one_fixes, one_steps = advice_with(1)
    fixes, steps = advice_with(cores)
    assert len(one_fixes) > 2 and len(one_steps) > 0
    assert fixes.to_pandas().equals(one_fixes.to_pandas())
    assert steps.to_pandas().equals(one_steps.to_pandas())


def test_a_replay_lets_go_of_its_times_and_makes_them_again(folder):
    """``Replay.release_times`` keeps the step tables; the times read afterwards are made again, the same; an edit
    of a what-if's copy of the delays writes its own cross delays and held edges, never the shared base's."""
    from holotrace.analysis.critical_path import job_what_if as jw

    g = build_job_graph(holotrace.load(str(folder), cache=False))
    rep = replay(g)
    times, steps = rep.times.copy(), rep.step_tab
    rep.release_times()
    assert rep._times is None and rep.step_tab is steps
    assert np.array_equal(rep.times, times)
    base = shared_base(g)
    cross, keep = base.cross.copy(), base.keep.copy()
    d = base.edited()
    assert not d.cross.flags.writeable and not d.keep.flags.writeable
    d.own("cross")[:] = 0.0
    d.own("keep")[:] = False
    assert np.array_equal(base.cross, cross) and np.array_equal(base.keep, keep)
    assert jw.apply(base, []).chain is not base.chain


@pytest.mark.parametrize("block", [1, 2, 7, 1 << 16])
def test_chain_lags_differenced_in_place_at_any_block(folder, monkeypatch, block):
    """The chain lags (made in place, a block at a time from the end) are each position's time less the one before,
    0 at a chain's first point, whatever the block; the base delays read them."""
    from holotrace.analysis.critical_path import job_graph

    g = build_job_graph(holotrace.load(str(folder), cache=False))
    monkeypatch.setattr(job_graph, "_LAG_BLOCK", block)
    pt = g.point_time[g.chain_order]
    want = np.r_[0.0, pt[1:] - pt[:-1]]
    want[g.chain_first] = 0.0
    assert len(want) > 20 and np.array_equal(g.chain_lag, want)
    d = base_delays(g)
    assert np.array_equal(d.chain[g.chain_first], np.zeros(int(g.chain_first.sum())))
