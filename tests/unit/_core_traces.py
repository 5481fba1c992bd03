"""Small hand-built traces shared by the core-analysis unit tests (values worked out in each test)."""

from __future__ import annotations

import holotrace
from holotrace import TraceAnalysis
from tracebuilder import TraceBuilder

GEMM = "void gemm_kernel<float>(float*, float const*)"
RELU = "relu_kernel"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"
OTHER = "void my_Memcpy_kernel(int)"  # contains "Memcpy" but does not start with it: OTHER


def load(tb: TraceBuilder, tmp_path, name: str = "t"):
    """(native job, HTA facade) of one built trace."""
    path = tb.write(tmp_path / f"{name}.json")
    job = holotrace.load(path, cache=False)
    return job, TraceAnalysis(job=job)


def mixed_trace(sync: bool = False) -> TraceBuilder:
    """One rank: compute, communication and memory work with gaps.

    GPU timeline (µs):  gemm [100,150) s7 · nccl [120,200) s20 · memcpy [250,260) s7 · relu [300,320) s7
    (+ a ``Stream Sync`` [400,410) on s7 when ``sync``).
    """
    tb = TraceBuilder(rank=0)
    tb.launch_kernel(GEMM, 10, 5, 100, 50, stream=7)
    tb.launch_kernel(NCCL, 20, 5, 120, 80, stream=20)
    tb.launch_kernel(MEMCPY, 30, 5, 250, 10, stream=7, cat="gpu_memcpy", launch_name="cudaMemcpyAsync")
    tb.launch_kernel(RELU, 40, 5, 300, 20, stream=7)
    if sync:
        tb.gpu("Stream Sync", 400, 10, stream=7, cat="cuda_sync")
    return tb
