"""A small data-parallel training job, simulated rank by rank, with causes of slowness that can be planted.

Each rank runs the same step: data loading (CPU), zero_grad (CPU), an input copy, a forward pass of ``layers``
(a GEMM and an elementwise kernel per layer, each launched by its operator after some host work), a backward pass
in reverse (a GEMM and an elementwise kernel per layer, then the layer's gradient bucket all-reduced on the
communication stream once the compute stream has produced it), an embedding-gradient kernel, and the optimizer,
which waits for the last all-reduce. GPU streams run their operations in launch order; an all-reduce ends on
every rank when the last rank has arrived plus its transfer time. Without any cause the job is GPU-bound.

Causes (each switched on alone or together; the same seed gives the same job otherwise, its **twin**):

* ``straggler=R`` — rank R's compute kernels take 1.3 times as long;
* ``slow_kernel`` — the backward GEMM takes twice as long on every rank;
* ``launch_bound`` — every kernel launch call takes 250 us on the host;
* ``comm_no_overlap`` — the compute stream waits for each all-reduce before going on;
* ``loader_stall`` — data loading takes 9 ms instead of 1 ms;
* ``blocking_copy`` — the step ends with ``loss.item()``: a blocking device-to-host copy to pageable memory.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tracebuilder import TraceBuilder

US = 1000  # ns per us
COMPUTE, COMM = 7, 20
GEMM_FWD = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
GEMM_BWD = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl, at::detail::Array<char*, 2> >"
)
ELEMENTWISE_BWD = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl>"
EMBED_BWD = "void at::native::embedding_backward_feature_kernel<float, float, long>"
ADAM = "void at::native::multi_tensor_apply_kernel<at::native::FusedAdamMathFunctor<float, 4> >"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


@dataclass
class Causes:
    straggler: int | None = None
    slow_kernel: bool = False
    launch_bound: bool = False
    comm_no_overlap: bool = False
    loader_stall: bool = False
    blocking_copy: bool = False


class _Rank:
    def __init__(self, rank: int, world: int, seed: int, causes: Causes, layers: int):
        self.rank, self.c, self.layers = rank, causes, layers
        self.tb = TraceBuilder(rank=rank, world_size=world, pid=1000 + rank, device=rank % 8)
        self.rng = random.Random(f"planted/{seed}/{rank}")
        self.cpu = 1_000 * US
        self.gpu = {COMPUTE: self.cpu, COMM: self.cpu}
        self.speed = 1.3 if causes.straggler == rank else 1.0
        self.world = world

    # ---- emitters (ns in, us out)
    def _op(self, name, start, end, cat="cpu_op", **args):
        return self.tb.cpu_op(name, start / US, (end - start) / US, cat=cat, **args)

    def launch(self, kernel: str, dur_ns: int, stream=COMPUTE, api="cudaLaunchKernel", wait_for=0, **gpu_args):
        """A launch call at the host clock; the kernel runs when its stream (and ``wait_for``) allow."""
        call = (250 if self.c.launch_bound and api == "cudaLaunchKernel" else 4) * US
        start = max(self.cpu + 3 * US, self.gpu[stream], wait_for)
        self.tb.launch_kernel(
            kernel, self.cpu / US, call / US, start / US, dur_ns / US, stream=stream, launch_name=api, **gpu_args
        )
        self.cpu += call
        self.gpu[stream] = start + dur_ns
        return start, start + dur_ns

    def compute_op(self, op: str, kernel: str, nominal_us: float, factor: float = 1.0):
        noise = 0.99 + 0.02 * self.rng.random()
        t0 = self.cpu
        self.cpu += 60 * US
        self.launch(kernel, int(nominal_us * US * noise * self.speed * factor))
        self.cpu += 10 * US
        self._op(op, t0, self.cpu)

    # ---- phases
    def begin_step(self, s: int):
        self.step_start = self.cpu
        self.step = s
        self.cpu += 5 * US
        t0 = self.cpu
        self.cpu += (9000 if self.c.loader_stall else 1000) * US
        self._op(LOADER, t0, self.cpu, cat="user_annotation")
        self.cpu += 5 * US
        t0 = self.cpu
        self.cpu += 800 * US
        self._op("Optimizer.zero_grad#AdamW.zero_grad", t0, self.cpu, cat="user_annotation")
        t0 = self.cpu
        self.cpu += 10 * US
        corr = self.tb._corr
        self.tb._corr += 1
        start = max(self.cpu + 3 * US, self.gpu[COMPUTE])
        self.tb.runtime("cudaMemcpyAsync", self.cpu / US, 5, correlation=corr)
        self.tb.gpu(
            "Memcpy HtoD (Pinned -> Device)", start / US, 20, stream=COMPUTE, cat="gpu_memcpy", correlation=corr
        )
        self.gpu[COMPUTE] = start + 20 * US
        self.cpu += 5 * US + 5 * US
        self._op("aten::copy_", t0, self.cpu)

    def forward(self):
        for _ in range(self.layers):
            self.compute_op("aten::linear", GEMM_FWD, 300)
            self.compute_op("aten::gelu", ELEMENTWISE, 60)

    def backward_layer(self):
        self.compute_op(
            "autograd::engine::evaluate_function: MmBackward0", GEMM_BWD, 600, 2.0 if self.c.slow_kernel else 1.0
        )
        self.compute_op("autograd::engine::evaluate_function: GeluBackward0", ELEMENTWISE_BWD, 60)

    def allreduce_arrive(self):
        """Launch the bucket's all-reduce; returns when this rank's kernel could start (arrival)."""
        self.coll_t0 = self.cpu
        self.cpu += 20 * US
        self.coll_call = self.cpu
        call = 8 * US
        self.coll_start = max(self.cpu + 3 * US, self.gpu[COMM], self.gpu[COMPUTE])
        self.cpu += call
        return self.coll_start

    def allreduce_end(self, end: int):
        corr = self.tb._corr
        self.tb._corr += 1
        args = {
            "Collective name": "allreduce",
            "Process Group Name": "0",
            "Process Group Ranks": str(list(range(self.world))),
            "In msg nelems": 1 << 20,
            "Group size": self.world,
        }
        self.tb.runtime("cudaLaunchKernelExC", self.coll_call / US, 8, correlation=corr)
        self.tb.gpu(
            ALLREDUCE, self.coll_start / US, (end - self.coll_start) / US, stream=COMM, correlation=corr, **args
        )
        self.gpu[COMM] = end
        if self.c.comm_no_overlap:
            self.gpu[COMPUTE] = max(self.gpu[COMPUTE], end)
        self.cpu += 5 * US
        self._op("record_param_comms", self.coll_t0, self.cpu, **args)

    def finish_step(self):
        self.compute_op("autograd::engine::evaluate_function: EmbeddingBackward0", EMBED_BWD, 500)
        t0 = self.cpu
        self.cpu += 30 * US
        self.tb.runtime("cudaStreamWaitEvent", self.cpu / US, 2)
        self.cpu += 2 * US
        self.gpu[COMPUTE] = max(self.gpu[COMPUTE], self.gpu[COMM])
        self.compute_op("aten::_fused_adamw_", ADAM, 200)
        self._op("Optimizer.step#AdamW.step", t0, self.cpu, cat="user_annotation")
        if self.c.blocking_copy:
            t0 = self.cpu
            self.cpu += 15 * US
            corr = self.tb._corr
            self.tb._corr += 1
            call = self.cpu
            start = max(call + 3 * US, self.gpu[COMPUTE])
            self.tb.gpu(
                "Memcpy DtoH (Device -> Pageable)", start / US, 3, stream=COMPUTE, cat="gpu_memcpy", correlation=corr
            )
            self.gpu[COMPUTE] = start + 3 * US
            self.cpu = start + 3 * US + 4 * US
            self.tb.runtime("cudaMemcpyAsync", call / US, (self.cpu - call) / US, correlation=corr)
            self.cpu += 3 * US
            self._op("aten::_local_scalar_dense", t0 + 5 * US, self.cpu)
            self.cpu += 2 * US
            self._op("aten::item", t0, self.cpu)
        self.cpu += 10 * US
        self._op(f"ProfilerStep#{self.step}", self.step_start, self.cpu, cat="user_annotation")


def planted_job(folder, *, ranks: int = 4, steps: int = 3, layers: int = 6, seed: int = 0, **causes) -> Path:
    """Write the job's rank files into ``folder`` (created); returns it."""
    c = Causes(**causes)
    sims = [_Rank(r, ranks, seed, c, layers) for r in range(ranks)]
    shared = random.Random(f"planted/{seed}/transfer")
    for s in range(steps):
        for x in sims:
            x.begin_step(s + 1)
            x.forward()
        for _ in range(layers):
            for x in sims:
                x.backward_layer()
            arrive = max(x.allreduce_arrive() for x in sims)
            end = arrive + int(300 * US * (0.99 + 0.02 * shared.random()))
            for x in sims:
                x.allreduce_end(end)
        for x in sims:
            x.finish_step()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for x in sims:
        x.tb.write(folder)
    return folder


HOST_ONLY = ("launch_overhead", "host_sync", "data_loading", "cpu_op")


def check_host_fixes_within_gpu_idle(a):
    """Fixes that leave GPU work alone never save more than the GPU's idle time of the rank they name (a job-wide
    fix: of the rank with the most idle time in that step): over the job exactly, and per step up to 1 % of the
    step (a rank's GPU work can start before the job's previous step ends on its slowest rank, so the step
    boundaries of one rank and of the job differ by that much)."""
    from holotrace.analysis.critical_path.replay import gpu_idle

    idle = gpu_idle(a.graph)
    most = idle.groupby("step")["idle_ms"].max()
    own = idle.set_index(["rank", "step"])["idle_ms"]
    per = a.per_step[a.per_step["fix"].isin(HOST_ONLY)]
    checked = 0
    for (fix, _, rank), p in per.groupby(["fix", "target", "rank"], dropna=False):
        if rank is None or rank != rank:
            allowed = most.reindex(p["step"]).to_numpy()
        else:
            allowed = own.reindex(pd.MultiIndex.from_arrays([[int(rank)] * len(p), p["step"]])).to_numpy()
        assert not np.isnan(allowed).any(), (fix, rank)
        assert p["saving_ms"].sum() <= allowed.sum() + 1e-6, (fix, rank)
        assert (p["saving_ms"].to_numpy() <= allowed + 0.01 * p["measured_ms"].to_numpy()).all(), (fix, rank)
        checked += len(p)
    return checked
