"""THE rule table: what every event is, in one place.

Every analysis asks this module, never its own regexes:

* :class:`Kind` — what an event is, from its category (and, for MTIA device
  events, its name): CPU op, annotation, runtime call, GPU kernel, memcpy ...
* :class:`KernelType` — COMMUNICATION / MEMORY / COMPUTATION / OTHER for GPU
  activity, by kernel name. The rules are HTA 0.6.1's (``get_kernel_type``),
  which the compatibility bar requires, plus ``rccl*`` names as communication
  (HTA calls them computation; see docs/compatibility.md).
* launch APIs, synchronisation calls, ``ProfilerStep#N`` recognition.

Rules are evaluated once per distinct string of the job's string table and
broadcast to events through integer ids, so classification is vectorised.
"""

from __future__ import annotations

import enum
import re
from typing import Iterable

import numpy as np

RULES_VERSION = 1


class Kind(enum.IntEnum):
    OTHER = 0
    CPU_OP = 1
    USER_ANNOTATION = 2
    RUNTIME = 3
    DRIVER = 4
    PYTHON = 5
    KERNEL = 10
    MEMCPY = 11
    MEMSET = 12
    SYNC = 13
    GPU_ANNOTATION = 14
    PROFILER_RANGE = 15
    TRACE_SPAN = 20
    OVERHEAD = 21

    @property
    def on_gpu(self) -> bool:
        return 10 <= self.value < 20


GPU_ACTIVITY = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
CPU_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER, Kind.PYTHON)


class KernelType(enum.IntEnum):
    COMMUNICATION = 0
    MEMORY = 1
    COMPUTATION = 2
    OTHER = 3


# Category (lower-cased) -> Kind. Legacy (2021) traces capitalise categories.
CATEGORY_KINDS: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "cuda_runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "python_function": Kind.PYTHON,
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "cuda_sync": Kind.SYNC,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_profiler_range": Kind.PROFILER_RANGE,
    "mtia_ccp_events": Kind.KERNEL,  # dma* names become MEMCPY below
    "trace": Kind.TRACE_SPAN,
    "overhead": Kind.OVERHEAD,
}

# Kernel-name rules (HTA 0.6.1, start-anchored ``re.match`` semantics).
_COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
_COMM_EXTRA = re.compile(r"^rccl")  # RCCL's own kernel prefix
_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)"
    r"|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)"
)

# CPU calls that put work on a GPU queue.
LAUNCH_APIS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice",
    "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cudaGraphLaunch", "cuGraphLaunch",
    "cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaMemcpy3DAsync", "cudaMemcpyPeerAsync", "cudaMemsetAsync",
    "cudaMemset2DAsync", "cudaMemcpy", "cudaMemset", "cuMemcpyAsync", "cuMemsetD8Async", "cuMemsetD32Async",
    "hipLaunchKernel", "hipExtLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipGraphLaunch",
    "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream", "hipMemcpy", "hipMemset",
    "runFunction - job_prep_and_submit_for_execution",
})
# The subset HTA's kernel-launch analyses recognise (get_runtime_launch_events_mask).
HTA_LAUNCH_APIS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
    "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel",
    "hipExtModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
})
# CPU calls that block the host until the GPU catches up.
SYNC_APIS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent", "cudaMemcpy",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipStreamWaitEvent", "hipMemcpy",
})

PROFILER_STEP = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
HTA_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)")  # HTA's last-step filter rule
HTA_STEP_NUMBER = re.compile(r"ProfilerStep\s*#\s*(\d+)")  # HTA's iteration / get_profiler_steps rule (re.match)


def hta_profiler_step_number(name: str) -> int:
    """HTA's step number of a name starting with ``ProfilerStep`` (iterations, get_profiler_steps), else -1."""
    if not name.startswith("ProfilerStep"):
        return -1
    m = HTA_STEP_NUMBER.match(name)
    return int(m.group(1)) if m else -1


def kernel_type_of_name(name: str, *, hta_compat: bool = False) -> KernelType:
    """Kernel type of one GPU activity name (full, unshortened)."""
    if _COMM.match(name) or (not hta_compat and _COMM_EXTRA.match(name)):
        return KernelType.COMMUNICATION
    if _MEMORY.match(name):
        return KernelType.MEMORY
    if not _NOT_COMPUTE.match(name):
        return KernelType.COMPUTATION
    return KernelType.OTHER


def kernel_type_of_names(names: Iterable[str], *, hta_compat: bool = False) -> np.ndarray:
    """Vectorised :func:`kernel_type_of_name` over distinct strings (int8 codes)."""
    arr = np.asarray(list(names) if not isinstance(names, np.ndarray) else names, dtype=object)
    if arr.size == 0:
        return np.empty(0, dtype=np.int8)
    uniq, inv = np.unique(arr.astype(str), return_inverse=True)
    types = np.array([int(kernel_type_of_name(n, hta_compat=hta_compat)) for n in uniq.tolist()], dtype=np.int8)
    return types[inv.reshape(-1)]


def is_communication_kernel_names(names: Iterable[str]) -> np.ndarray:
    """Every communication kernel family: nccl*/ncclKernel*/ncclDevKernel*, rccl*, hccl*, hip collectives."""
    return kernel_type_of_names(names) == KernelType.COMMUNICATION


def profiler_step_number(name: str) -> int:
    """N of ``ProfilerStep#N`` (spaces around ``#`` allowed), else -1."""
    m = PROFILER_STEP.match(name)
    return int(m.group(1)) if m else -1


def classify_strings(table: list[str]) -> dict[str, np.ndarray]:
    """Per-string lookup arrays (index = string id) used to classify events in bulk."""
    n = len(table)
    kernel_type = np.full(n, -1, dtype=np.int8)
    kernel_type_hta = np.full(n, -1, dtype=np.int8)
    is_launch = np.zeros(n, dtype=bool)
    is_hta_launch = np.zeros(n, dtype=bool)
    is_sync_api = np.zeros(n, dtype=bool)
    step = np.full(n, -1, dtype=np.int64)
    for i, s in enumerate(table):
        kernel_type[i] = kernel_type_of_name(s)
        kernel_type_hta[i] = kernel_type_of_name(s, hta_compat=True)
        is_launch[i] = s in LAUNCH_APIS
        is_hta_launch[i] = s in HTA_LAUNCH_APIS
        is_sync_api[i] = s in SYNC_APIS
        if s.startswith("ProfilerStep"):
            step[i] = profiler_step_number(s)
    return {
        "kernel_type": kernel_type,
        "kernel_type_hta": kernel_type_hta,
        "is_launch": is_launch,
        "is_hta_launch": is_hta_launch,
        "is_sync_api": is_sync_api,
        "step": step,
    }


def kinds(cat_ids: np.ndarray, name_ids: np.ndarray, table: list[str]) -> np.ndarray:
    """Kind code (int8) per event."""
    n = len(table)
    lut = np.zeros(n + 1, dtype=np.int8)
    for i, s in enumerate(table):
        lut[i] = CATEGORY_KINDS.get(s.lower(), Kind.OTHER)
    out = lut[np.where(cat_ids >= 0, cat_ids, n)]
    # MTIA DMA activity is memory traffic
    mtia = [i for i, s in enumerate(table) if s == "mtia_ccp_events"]
    if mtia:
        dma = np.zeros(n + 1, dtype=bool)
        for i, s in enumerate(table):
            dma[i] = s.startswith("dma")
        sel = (cat_ids == mtia[0]) & dma[np.where(name_ids >= 0, name_ids, n)]
        out[sel] = Kind.MEMCPY
    return out


def unknown_categories(cat_ids: np.ndarray, table: list[str]) -> dict[str, int]:
    """Categories no rule knows, with their event counts (reported, never dropped)."""
    counts = np.bincount(cat_ids[cat_ids >= 0], minlength=len(table))  # ids are dense: a count per string
    ids = np.flatnonzero(counts)
    return {table[i]: int(counts[i]) for i in ids.tolist() if table[i].lower() not in CATEGORY_KINDS}
