"""What-if on generated jobs with a planted cause (the acceptance of the what-if ranking).

Each job is simulated by hand: one CPU thread issues its operators back to back (self time before the launch,
the launch call, self time after it); a kernel starts once its launch call has ended and its stream is free; a
collective ends on every rank when the last rank has arrived plus its transfer time; the step ends with a
``cudaDeviceSynchronize`` that returns when the GPU is done. For every planted cause the what-if must rank it
first, and the step time it predicts once the cause is gone (measured step − predicted saving) must be within
5% of the step time of a second job built without that cause. The figures are quoted in docs/analyses.md.
"""

from __future__ import annotations

import numpy as np
import pytest

import holotrace
from holotrace.analysis.critical_path.what_if import what_if
from tracebuilder import TraceBuilder

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


class _Sim:
    """One rank's step: ``op`` issues a kernel; ``step`` closes the step with a device synchronisation."""

    def __init__(self, rank: int = 0, world_size: int = 1, t0: float = 1000.0):
        self.tb = TraceBuilder(rank=rank, world_size=world_size)
        self.t0 = self.t = t0
        self.free: dict[int, float] = {}
        self.kernels: list[tuple[str, float, float]] = []  # name, start, end

    def op(
        self,
        kernel: str,
        kernel_us: float,
        *,
        pre: float = 1.0,
        launch: float = 4.0,
        post: float = 1.0,
        stream: int = 7,
        not_before: float = 0.0,
    ) -> tuple[float, float]:
        """An operator launching ``kernel``; returns the kernel's (start, end)."""
        ls = self.t + pre
        le = ls + launch
        ks = max(le, self.free.get(stream, 0.0), not_before)
        self.tb.cpu_op("aten::op", self.t, pre + launch + post)
        self.tb.launch_kernel(kernel, ls, launch, ks, kernel_us, stream=stream)
        self.free[stream] = ks + kernel_us
        self.kernels.append((kernel, ks, ks + kernel_us))
        self.t = le + post
        return ks, ks + kernel_us

    def step(self, n: int = 1) -> float:
        """Close the step (``cudaDeviceSynchronize`` + ``Context Sync``); returns the step's duration."""
        gpu_end = max(self.free.values())
        end = max(self.t, gpu_end) + 1.0
        corr = 90000 + n
        self.tb.runtime("cudaDeviceSynchronize", self.t, end - self.t, correlation=corr)
        self.tb.raw(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Context Sync",
                "pid": self.tb.device,
                "tid": -1,
                "ts": end - 1.0,
                "dur": 1.0,
                "args": {"cuda_sync_kind": "Context Sync", "stream": -1, "correlation": corr, "device": self.tb.device},
            }
        )
        self.tb.annotation(f"ProfilerStep#{n}", self.t0, end - self.t0)
        return end - self.t0


def _load(tmp_path, name, sims):
    folder = tmp_path / name
    for s in sims:
        s.tb.write(folder)
    return holotrace.load(str(folder), cache=False)


def _check(job, step_a: float, step_b: float, cause: str, rank: int = 0):
    df = what_if(job, rank=rank)
    assert df.fix.iloc[0] == cause, df
    saving = float(df.saving.iloc[0])
    predicted = step_a - saving
    assert abs(predicted - step_b) <= 0.05 * step_b, (step_a, saving, predicted, step_b)
    return df, saving, predicted


# ---------------------------------------------------------------- launch-bound
def _launch_job(launch_us: float):
    s = _Sim()
    for _ in range(20):
        s.op(GEMM, 2.0, pre=2.0, launch=launch_us, post=1.0)
    return s, s.step()


def test_launch_bound(tmp_path):
    a, step_a = _launch_job(10.0)
    b, step_b = _launch_job(0.001)  # launch overhead gone (1 ns calls)
    assert step_a == pytest.approx(262.0) and step_b == pytest.approx(62.02, abs=0.01)
    df, saving, predicted = _check(_load(tmp_path, "a", [a]), step_a, step_b, "launch_overhead")
    # 20 launch calls of 10 us leave the path; the last kernel's launch delay too
    assert saving == pytest.approx(200.0, abs=0.01)
    assert "cudaLaunchKernel" in df.evidence.iloc[0]


# ---------------------------------------------------------------- communication-bound, no overlap
def test_communication_bound(tmp_path):
    a = _Sim()
    for _ in range(5):
        a.op(GEMM, 100.0)
        a.op(NCCL, 90.0)  # same stream: nothing overlaps
    step_a = a.step()
    b = _Sim()
    for _ in range(5):
        b.op(GEMM, 100.0)
        b.op(NCCL, 90.0, stream=20)  # its own stream: hidden under the compute
    step_b = b.step()
    assert step_a == pytest.approx(956.0) and step_b == pytest.approx(506.0)
    df, saving, _ = _check(_load(tmp_path, "a", [a]), step_a, step_b, "communication")
    assert saving == pytest.approx(450.0, abs=0.01)
    assert df.set_index("fix").loc["communication", "edges"] == 5


# ---------------------------------------------------------------- one slow rank
def _ranks_job(slow_us: float, n_ranks: int = 4, pairs: int = 3, transfer: float = 20.0):
    sims = [_Sim(rank=r, world_size=n_ranks) for r in range(n_ranks)]
    compute = [slow_us if r == n_ranks - 1 else 100.0 for r in range(n_ranks)]
    for _ in range(pairs):
        arrive = []
        for r, s in enumerate(sims):
            arrive.append(s.op(GEMM, compute[r])[1])
        done = max(arrive) + transfer
        for r, s in enumerate(sims):
            start = max(s.t + 5.0, arrive[r])
            s.op(NCCL, done - start, not_before=arrive[r])
    steps = [s.step() for s in sims]
    return sims, steps


def test_slow_rank(tmp_path):
    a, steps_a = _ranks_job(300.0)
    b, steps_b = _ranks_job(100.0)
    assert steps_a[0] == pytest.approx(966.0) and steps_b[0] == pytest.approx(366.0)
    job = _load(tmp_path, "a", a)
    df, saving, _ = _check(job, steps_a[0], steps_b[0], "slowest_rank")
    # every all-reduce on rank 0 waits 200 us for rank 3
    assert saving == pytest.approx(600.0, abs=0.01)
    assert df.evidence.iloc[0].startswith("waiting for rank 3")
    fixes = df.set_index("fix")
    # overlapping communication hides only the 20 us transfers, not the wait
    assert fixes.loc["communication", "saving"] == pytest.approx(60.0, abs=0.01)
    # the slow rank itself waits for nobody
    own = what_if(job, rank=3)
    assert "slowest_rank" not in set(own.fix)


# ---------------------------------------------------------------- one kernel
def _kernel_job(big_us: float):
    s = _Sim()
    for i in range(11):
        s.op(GEMM if i == 5 else "vectorized_elementwise_kernel", big_us if i == 5 else 5.0)
    return s, s.step()


def test_single_kernel(tmp_path):
    a, step_a = _kernel_job(2000.0)
    b, step_b = _kernel_job(1000.0)  # that kernel 2x faster
    assert step_a == pytest.approx(2061.0) and step_b == pytest.approx(1061.0)
    df, saving, predicted = _check(_load(tmp_path, "a", [a]), step_a, step_b, "top_kernels")
    # the top 5 kernels halved: the 2000 us one and four 5 us ones
    assert saving == pytest.approx(1010.0, abs=0.01)
    assert GEMM[:20] in df.evidence.iloc[0]


def test_savings_never_exceed_the_path(tmp_path):
    a, _ = _ranks_job(300.0)
    df = what_if(_load(tmp_path, "a", a), rank=1)
    assert (df.saving >= 0).all() and (df.saving <= df.path_length + 1e-9).all()
    assert (np.diff(df.saving.to_numpy()) <= 1e-9).all()


# ---------------------------------------------------------------- GPU copies of the step annotation
def test_one_path_per_step_with_gpu_annotation_twins(tmp_path):
    """A ``gpu_user_annotation`` copy of each ``ProfilerStep`` (written without a stream, as some exporters do)
    is not a second step: each step gives one path, and its classes sum to the path once."""
    from holotrace.analysis.critical_path import per_step

    s = _Sim()
    lengths = []
    for n in (1, 2):
        s.t0 = s.t = s.t0 + sum(lengths) + 10.0 * n
        for _ in range(4):
            s.op(GEMM, 50.0)
        lengths.append(s.step(n))
        s.tb.annotation(f"ProfilerStep#{n}", s.t0 + 6.0, lengths[-1] - 8.0, tid=7, cat="gpu_user_annotation")
    job = _load(tmp_path, "twins", [s])
    df = per_step(job, rank=0)
    assert sorted(set(df.step)) == [1, 2]
    assert not df.duplicated(["step", "bound_by"]).any(), df
    total = df.groupby("step").duration.sum()
    assert (total == df.groupby("step").path_length.first()).all()
    # the path of a step spans its kernels: 4 x 50 us of compute, not twice that
    comp = df[df.bound_by == "gpu_compute_bound"].set_index("step").duration
    assert comp.to_dict() == {1: 200_000.0, 2: 200_000.0}
    wi = what_if(job, rank=0)
    assert not wi.duplicated(["step", "fix"]).any(), wi
    assert set(wi.step) == {1, 2}
