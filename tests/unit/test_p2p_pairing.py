"""Point-to-point transfers paired by peer (``Dst Rank`` on a send, ``Src Rank`` on a recv), worked by hand on a
three-stage pipeline.

Step 1 on every rank: ``ProfilerStep#1`` on the host from 0 to 50 us. Rank 0 runs a GEMM from 20 to 320 us, then
sends to rank 1 (its kernel 320-370 us). Rank 1's recv from rank 0 starts at 40 us and ends at 370 us (it waited
for rank 0 from 40 to 320 us, then 50 us of transfer); then it sends to rank 2 (370-420 us). Rank 2's recv from
rank 1 runs from 40 to 420 us. By name and order alone, the two sends (ranks 0 and 1) would be one "collective"
and the two recvs another; by peer, each send is paired with the recv of its receiver.
"""

from __future__ import annotations

import numpy as np
import pytest

import holotrace
from holotrace.analysis.critical_path.collectives import match_collectives
from holotrace.analysis.critical_path.job_graph import build_job_graph
from holotrace.analysis.critical_path.replay import replay
from holotrace.analysis.stragglers import collective_waits
from tracebuilder import TraceBuilder

SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"


def _p2p(tb, kind, peer, start, end, call_at=30):
    field = "Dst Rank" if kind == "send" else "Src Rank"
    args = {"collective_name": kind, "process_group_name": "0", field: peer}
    tb.launch_kernel(SENDRECV, call_at, 5, start, end - start, stream=20, launch_name="cudaLaunchKernelExC", **args)


def _pipeline(folder, extra=None):
    tbs = [TraceBuilder(rank=r, world_size=3, pid=100 + r, device=r) for r in range(3)]
    for tb in tbs:
        tb.annotation("ProfilerStep#1", 0, 50)
    tbs[0].launch_kernel("gemm_kernel", cpu_ts_us=10, cpu_dur_us=5, gpu_ts_us=20, gpu_dur_us=300)
    _p2p(tbs[0], "send", 1, 320, 370)
    _p2p(tbs[1], "recv", 0, 40, 370)
    _p2p(tbs[1], "send", 2, 370, 420, call_at=36)
    _p2p(tbs[2], "recv", 1, 40, 420)
    if extra:
        extra(tbs)
    for tb in tbs:
        tb.write(folder)
    return holotrace.load(str(folder), cache=False)


def _members(m):
    k = m.kernels
    return sorted(tuple(sorted(g["rank"].tolist())) for _, g in k.groupby("instance"))


def test_paired_by_peer(tmp_path):
    job = _pipeline(tmp_path)
    m = match_collectives(job)
    assert m.unmatched == [] and m.n_instances == 2
    assert _members(m) == [(0, 1), (1, 2)]
    # each pair's kinds: a send and a recv
    kinds = m.kernels.groupby("instance")["kind"].nunique().tolist()
    assert kinds == [2, 2]
    # rank 1 waited 280 us for rank 0 (330 us in its recv against rank 0's 50 us send); rank 2 waited 330 us for
    # rank 1 (380 against 50)
    w = collective_waits(job).sort_values(["start_us", "rank"]).reset_index(drop=True)
    got = {(int(r.rank), int(r.last_arrival)): r.wait_us for r in w.itertuples()}
    assert got == {(0, 0): 0.0, (1, 0): pytest.approx(280.0), (1, 1): 0.0, (2, 1): pytest.approx(330.0)}
    # the replay reproduces the step: it ends when rank 2's recv ends, 420 us after the step starts
    rep = replay(build_job_graph(job))
    assert rep.steps["measured_ms"].tolist() == [pytest.approx(0.420)]
    assert rep.steps["error_pct"].abs().max() <= 1e-9


def test_unpaired_are_reported(tmp_path):
    def extra(tbs):
        _p2p(tbs[0], "send", 7, 380, 390, call_at=40)  # rank 7 has no trace in this job
        _p2p(tbs[2], "recv", 1, 430, 440, call_at=40)  # rank 1 sends only one transfer to rank 2

    m = match_collectives(_pipeline(tmp_path, extra))
    assert _members(m) == [(0, 1)]  # 1 -> 2 holds one send against two recvs: not paired
    assert sorted(m.unmatched) == [
        "1 transfer(s) from rank 0 to rank 7 not paired: rank 7 is not in the job",
        "step 1: rank 1 sends 1 transfer(s) to rank 2, which receives 2 from it; not paired",
    ]


def test_reduce_of_summaries_pairs_the_same(tmp_path):
    """The map/reduce path (each rank's summary, folded) pairs the transfers as the job loaded here does."""
    from holotrace.analysis.rank_summary import rank_summary
    from holotrace.analysis.reduce import reduce_summaries
    from holotrace.scale.store import summary_from_bytes, summary_to_bytes

    job = _pipeline(tmp_path)
    summaries = [summary_from_bytes(summary_to_bytes(rank_summary(job, r))) for r in job.ranks]  # as stored
    reduced = reduce_summaries(summaries)["collective_waits"].to_pandas()
    here = collective_waits(job)
    assert len(here) == 4
    assert reduced[["rank", "wait_us", "last_arrival"]].equals(here[["rank", "wait_us", "last_arrival"]])


def test_distinct_key_rows_are_numpys():
    """The collectives' group keys: the distinct rows of integer columns ascending and each row's code, as
    ``np.unique(axis=0, return_inverse=True)`` gives them (negative and wide values, one to four columns)."""
    from holotrace.analysis.critical_path.collectives import _keys

    rng = np.random.default_rng(0)
    for _ in range(200):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 5))
        cols = [rng.integers(-3, 4, n) * 10 ** int(rng.integers(0, 12)) for _ in range(k)]
        u, inv = _keys(*cols)
        want_u, want_inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        assert np.array_equal(u, want_u) and u.shape == want_u.shape and np.array_equal(inv, want_inv.reshape(-1))
    u, inv = _keys(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert u.shape == (0, 2) and inv.shape == (0,)
