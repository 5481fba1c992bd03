"""The host time of the job's what-ifs (``critical_path.host_time``): the gaps' covers where the intervals reach them
equal the covers of every gap, the rows of several names found at once equal one name at a time, the CPU parents
made beside the advice are the ones it reads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import holotrace
from holotrace.analysis.callstack import cpu_parents
from holotrace.analysis.critical_path import host_time as ht
from holotrace.analysis.critical_path.replay import _covered
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder


def _windows(rng, n, spread):
    """Ordered windows (starts and ends ascending), some empty, some touching."""
    lo = np.cumsum(rng.integers(0, spread, n)).astype(np.float64)
    hi = lo + rng.integers(0, spread, n)
    hi = np.maximum.accumulate(hi)
    lo = np.minimum(lo, hi)
    return lo, hi


@pytest.mark.parametrize("seed", range(40))
def test_covers_where_the_intervals_reach_equal_every_covers(seed):
    rng = np.random.default_rng(seed)
    lo, hi = _windows(rng, int(rng.integers(1, 60)), int(rng.integers(1, 8)))
    k = int(rng.integers(1, 30))
    s = rng.integers(int(lo.min()) - 3, int(hi.max()) + 3, k).astype(np.float64)
    e = s + rng.integers(0, 10, k)  # nested, overlapping, touching, empty intervals, in any order
    full = _covered(s, e, lo, hi)
    m = np.arange(len(lo)) * 3 + 7  # (the windows' positions somewhere else)
    at, cover = ht._covered_ordered(s, e, lo, hi, m)
    assert np.all(np.diff(at) > 0) and set(at.tolist()) <= set(m.tolist())
    got = np.zeros(len(lo))
    got[(at - 7) // 3] = cover
    assert got.tobytes() == full.tobytes()  # the same numbers, bit for bit; the windows left out have none
    assert set(np.flatnonzero(full > 0).tolist()) <= set(((at - 7) // 3).tolist())


def test_groups_as_unique_and_masks():
    rng = np.random.default_rng(1)
    for th in (np.repeat([5, 2, 9], [3, 4, 2]), rng.integers(0, 4, 50), np.zeros(1, dtype=np.int64), np.arange(6)):
        groups = ht._groups(th)
        assert [t for t, _ in groups] == np.unique(th).tolist()
        for t, sel in groups:
            assert np.arange(len(th))[sel].tolist() == np.flatnonzero(th == t).tolist()
    assert ht._groups(np.zeros(0, dtype=np.int64)) == []


def _job(tmp_path, ranks=2):
    for r in range(ranks):
        tb = TraceBuilder(rank=r, world_size=ranks)
        tb.annotation("ProfilerStep#1", 0, 1000)
        tb.cpu_op("aten::mm", 10, 200)
        tb.cpu_op("aten::add_", 300, 100)
        tb.cpu_op("aten::mm", 500, 50)
        tb.launch_kernel(f"k{r}", 20, 5, 40, 30)
        tb.write(tmp_path)
    return job_view(holotrace.load(tmp_path, cache=False), NATIVE)


def test_rows_of_several_names_at_once(tmp_path):
    view = _job(tmp_path)
    ranks = list(view.ranks)
    named = [view.name_ids({"aten::mm"}), view.name_ids({"aten::add_"}), view.name_ids({"nothing"})]
    one_by_one = []
    for ids in named:
        mine = np.zeros(len(view.strings) + 1, dtype=bool)
        mine[ids] = True
        one_by_one.append({r: np.flatnonzero(mine[view[r]["name"]]) for r in ranks})
    for got in (ht._rows_named(view, ranks, named), ht._rows_named(view, ranks, named + [named[0]])):
        for a, b in zip(got, one_by_one + [one_by_one[0]]):
            assert {r: v.tolist() for r, v in a.items()} == {r: v.tolist() for r, v in b.items()}


def test_cpu_parents_made_beside_are_the_ones_read(tmp_path):
    view = _job(tmp_path)
    make = ht.cpu_parents_later(view, view.ranks)
    t = threading.Thread(target=make)
    t.start()
    got = {r: ht._parents(view, r) for r in view.ranks}  # (made here or waited for)
    t.join()
    for r in view.ranks:
        assert got[r] is ht._parents(view, r)  # made once
        assert got[r].tolist() == cpu_parents(view, r).tolist()


def _gaps_by_every_position(g):
    """The CPU gaps' groups as first made: each gap's chain searched, each gap's rank and thread read."""
    from holotrace.analysis.critical_path.job_graph import EdgeKind

    pos = np.flatnonzero(g.chain_kind == EdgeKind.CPU_GAP)
    node = g.chain_order[pos] // 2
    rk, th = g.node_rank[node], ht._threads(g, pos, node)
    srt = np.lexsort((th, rk))
    cut = np.flatnonzero(np.r_[True, (rk[srt][1:] != rk[srt][:-1]) | (th[srt][1:] != th[srt][:-1])])
    bounds = zip(cut.tolist(), np.r_[cut[1:], len(srt)].tolist())
    return {(int(rk[srt[a]]), int(th[srt[a]])): srt[a:b].tolist() for a, b in bounds}


def test_gaps_grouped_by_chain_runs_as_by_every_gap():
    from corpus import DATA
    from holotrace.analysis.critical_path import job_what_if as jw
    from holotrace.analysis.critical_path.job_graph import build_job_graph

    g = build_job_graph(holotrace.load(str(DATA / "traces" / "hta_trace_filter_2rank"), cache=False))
    info = jw.node_info(g)
    pos, lo, hi, groups = ht._gaps(g, info)
    assert len(groups) >= 2 and len(pos) > 1000
    assert {k: v.tolist() for k, v in groups.items()} == _gaps_by_every_position(g)
    # a (rank, thread) on two chains: grouped by key
    g.memo.pop("cpu_gaps")
    first = np.flatnonzero(g.chain_first)
    split = int(pos[len(pos) // 2])
    g.chain_first[split] = True  # (a chain cut in two: the same thread on both halves)
    try:
        again = ht._gaps(g, info)[3]
    finally:
        g.chain_first[split] = False
        g.memo.pop("cpu_gaps")
    assert {k: v.tolist() for k, v in again.items()} == {k: v.tolist() for k, v in groups.items()}
    assert len(first) == int(g.chain_first.sum())


def test_cpu_op_totals_without_cpu_gaps(tmp_path):
    """A graph part without CPU gaps (a rank's segment with no calls between others) holds no operator's time."""
    from holotrace.analysis.critical_path import job_what_if as jw
    from holotrace.analysis.critical_path.job_graph import EdgeKind, build_job_graph
    from holotrace.analysis.critical_path.replay import shared_base

    g = build_job_graph(_job(tmp_path))
    base = shared_base(g)
    none = np.zeros(0, dtype=np.int64)
    assert ht.cpu_op_totals(g, jw.node_info(g), none, base) == {}
    assert ht.cpu_op_totals(g, jw.node_info(g), np.flatnonzero(g.chain_kind == EdgeKind.CPU_GAP), base)
