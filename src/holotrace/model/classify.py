"""THE rule table: what every event is, in one place.

Every analysis asks this module, never its own regexes:

* :class:`Kind` — what an event is, from its category (and, for MTIA device
  events, its name): CPU op, annotation, runtime call, GPU kernel, memcpy ...
* :class:`KernelType` — COMMUNICATION / MEMORY / COMPUTATION / OTHER for GPU
  activity, and :class:`CommKind` — which collective: the rule table
  ``default.rules`` (data shipped in the package, read by
  :mod:`holotrace.model.rule_table`; users add rules with ``--rules``,
  ``$HOLOTRACE_RULES`` or ``rules=``). Its ``hta`` rules are HTA 0.6.1's
  (``get_kernel_type``), the only ones under the HTA rule sets; holotrace's
  own rules add every collective library it knows and, in the view,
  the collective operators GPU work was launched under
  (:mod:`holotrace.model.comm_evidence`; docs/rules.md).
* launch APIs, synchronisation calls, ``ProfilerStep#N`` recognition.

Rules are evaluated once per distinct string of the job's string table and
broadcast to events through integer ids, so classification is vectorised.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from holotrace.model.rule_table import CommKind, KernelType, default_table, hta_table  # noqa: F401  (CommKind re-exported)

RULES_VERSION = 3  # the derived columns of the cached model (kernel types are the view's, under a rule table)


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

# CPU calls that put work on a GPU queue.
LAUNCH_APIS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cudaGraphLaunch",
        "cuGraphLaunch",
        "cudaMemcpyAsync",
        "cudaMemcpy2DAsync",
        "cudaMemcpy3DAsync",
        "cudaMemcpyPeerAsync",
        "cudaMemsetAsync",
        "cudaMemset2DAsync",
        "cudaMemcpy",
        "cudaMemset",
        "cuMemcpyAsync",
        "cuMemsetD8Async",
        "cuMemsetD32Async",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipModuleLaunchKernel",
        "hipGraphLaunch",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipMemcpyWithStream",
        "hipMemcpy",
        "hipMemset",
        "runFunction - job_prep_and_submit_for_execution",
    }
)
# The subset HTA recognises as runtime launch events (get_runtime_launch_events_mask).
HTA_LAUNCH_APIS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "runFunction - job_prep_and_submit_for_execution",
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipMemcpyWithStream",
    }
)
# The launch calls HTA's launch statistics pair with GPU work (cuda_kernel_launch_stats), and the memory ones
# it adds with include_memory_events.
HTA_LAUNCH_STATS_APIS = frozenset(
    {"cudaLaunchKernel", "cudaLaunchKernelExC", "runFunction - job_prep_and_submit_for_execution"}
)
HTA_MEMORY_LAUNCH_STATS_APIS = frozenset({"cudaMemsetAsync", "cudaMemcpyAsync"})
# HTA's ATen-op analyses: a launch is a call whose name matches this at its start (re.match)
HTA_ATEN_LAUNCH = re.compile(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)")
# CPU calls that synchronise a GPU stream or event but carry a correlation like GPU work (HTA's GPU-row test)
HTA_SYNC_EVENT_NAMES = ("Event Sync", "Context Sync")
# Categories of the GPU operations between which HTA's idle-time breakdown measures gaps
HTA_KERNEL_CATEGORIES = frozenset(
    {"kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events"}
)

PROFILER_STEP = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
HTA_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)")  # HTA's last-step filter rule
HTA_STEP_NUMBER = re.compile(r"ProfilerStep\s*#\s*(\d+)")  # HTA's iteration / get_profiler_steps rule (re.match)


def hta_profiler_step_number(name: str) -> int:
    """HTA's step number of a name starting with ``ProfilerStep`` (iterations, get_profiler_steps), else -1."""
    if not name.startswith("ProfilerStep"):
        return -1
    m = HTA_STEP_NUMBER.match(name)
    return int(m.group(1)) if m else -1


def is_memory_api(name: str) -> bool:
    """A launch call that copies or sets memory (``*Memcpy*`` / ``*Memset*``)."""
    return "Memcpy" in name or "Memset" in name


def is_memory_kernel_name(name: str) -> bool:
    """HTA's memory-kernel name test (``is_memory_kernel``: the ``hta`` memory rule of the table, ``[hip]Memcpy*``,
    ``[hip]Memset*``, ``dma*``), on its own: ``hipMemcpy*`` passes it although its kernel type is COMMUNICATION
    (the ``hta`` communication rule comes first)."""
    return any(r.pattern.search(name) for r in hta_table().rules if r.type is KernelType.MEMORY)


def hta_kernel_pattern(kernel_type: KernelType) -> re.Pattern:
    """The expression of HTA's rule for one kernel type (the table's ``hta`` rule; for COMPUTATION, the rule of
    what is *not* computation, OTHER's), matched at the start of a name as HTA's ``re.match``."""
    want = KernelType.OTHER if kernel_type is KernelType.COMPUTATION else kernel_type
    return re.compile(next(r.regex for r in hta_table().rules if r.type is want))  # (as HTA writes it)


def kernel_type_of_name(name: str, *, hta_compat: bool = False) -> KernelType:
    """Kernel type of one GPU activity name (full, unshortened) by the built-in table's kernel-name rules (HTA's
    rules only with ``hta_compat``). The name alone: the view also reads the launching operator."""
    return KernelType((hta_table() if hta_compat else default_table()).kernel_rule(name)[0])


def is_communication_kernel(name: str) -> bool:
    """A communication kernel by its name under the built-in table (every family it knows)."""
    return kernel_type_of_name(name) == KernelType.COMMUNICATION


def profiler_step_number(name: str) -> int:
    """N of ``ProfilerStep#N`` (spaces around ``#`` allowed), else -1."""
    m = PROFILER_STEP.match(name)
    return int(m.group(1)) if m else -1


def classify_strings(table: list[str]) -> dict[str, np.ndarray]:
    """Per-string lookup arrays (index = string id) used to classify events in bulk."""
    n = len(table)
    is_launch = np.zeros(n, dtype=bool)
    step = np.full(n, -1, dtype=np.int64)
    for i, s in enumerate(table):
        is_launch[i] = s in LAUNCH_APIS
        if s.startswith("ProfilerStep"):
            step[i] = profiler_step_number(s)
    return {"is_launch": is_launch, "step": step}


class KindLookup:
    """The kind (int8) of events from their category and name ids: the table's strings classified once.

    Kinds come from the category; MTIA DMA activity (``mtia_ccp_events`` named ``dma*``) is memory traffic.
    """

    def __init__(self, table: list[str]):
        n = self.n = len(table)
        self.lut = np.zeros(n + 1, dtype=np.int8)  # one slot more, for a missing id -1
        self.dma = np.zeros(n + 1, dtype=bool)
        self.mtia = -1
        for i, s in enumerate(table):
            self.lut[i] = CATEGORY_KINDS.get(s.lower(), Kind.OTHER)
            self.dma[i] = s.startswith("dma")
            if self.mtia < 0 and s == "mtia_ccp_events":
                self.mtia = i

    def __call__(self, cat_ids: np.ndarray, name_ids: np.ndarray) -> np.ndarray:
        out = self.lut[np.where(cat_ids >= 0, cat_ids, self.n)]
        if self.mtia >= 0:
            sel = (cat_ids == self.mtia) & self.dma[np.where(name_ids >= 0, name_ids, self.n)]
            out[sel] = Kind.MEMCPY
        return out


def is_gpu_activity(kind: np.ndarray) -> np.ndarray:
    """Which kinds are GPU work: kernels, memcpy and memset (:data:`GPU_ACTIVITY`)."""
    return kind_in(kind, _GPU_ACTIVITY_CODES)


def kind_in(kind: np.ndarray, codes) -> np.ndarray:
    """``np.isin(kind, codes)`` for a few kind codes: one vectorised comparison per code (on an int8 column of
    200 k events ~0.05 ms, against numpy's isin's ~1.5 ms)."""
    kind = np.asarray(kind)
    out = np.zeros(kind.shape, dtype=bool)
    for c in codes:
        out |= kind == int(c)
    return out


_GPU_ACTIVITY_CODES = np.array([int(k) for k in GPU_ACTIVITY], dtype=np.int8)


def unknown_category_counts(counts: np.ndarray, table: list[str]) -> dict[str, int]:
    """Categories no rule knows, with their event counts (reported, never dropped), from the event count of each
    category string id."""
    ids = np.flatnonzero(counts)
    return {table[i]: int(counts[i]) for i in ids.tolist() if table[i].lower() not in CATEGORY_KINDS}


@dataclass(frozen=True)
class RuleSet:
    """Which rules an analysis follows: holotrace's, or HTA 0.6.1's.

    Every analysis takes one; the HTA-compatible facade passes :data:`HTA` (or :data:`HTA_FIXED`), the
    native API and the commands :data:`NATIVE`.

    Attributes:
        name: a label for messages and metadata.
        hta_table: read events as HTA's loader leaves them (spec 11): rows with a category other than
            ``Trace``, µs times rounded HTA's way and aligned to the job's earliest start, the last
            ``ProfilerStep`` dropped, every row that carries a stream counted as GPU work, kernel types
            by HTA's regexes, iterations by HTA's step rule. Otherwise: exact ns on each rank's own
            clock, every event kept, GPU work = kernels, memcpy and memset, holotrace's kernel types.
        hta_quirks: reproduce HTA's known bugs where an analysis documents them (docs/compatibility.md),
            instead of holotrace's fixes.
        launch_apis: the CPU calls whose GPU work the launch statistics pair.
        memory_launch_apis: the memory-copy/set subset, left out unless memory events are asked for.
    """

    name: str
    hta_table: bool
    hta_quirks: bool
    launch_apis: frozenset
    memory_launch_apis: frozenset

    def step_number(self, name: str) -> int:
        """The ``ProfilerStep`` number of a name under these rules, else -1."""
        return hta_profiler_step_number(name) if self.hta_table else profiler_step_number(name)

    def is_communication(self, name: str) -> bool:
        """A communication kernel by name for the straggler analysis (HTA's quirk: ``ncclKernel*`` only)."""
        if self.hta_quirks:
            return name.startswith("ncclKernel")
        return kernel_type_of_name(name) == KernelType.COMMUNICATION


_MEMORY_LAUNCH_APIS = frozenset(n for n in LAUNCH_APIS if is_memory_api(n))

#: holotrace's rules: exact ns, every event, the full launch-API list, no HTA bugs.
NATIVE = RuleSet(
    "holotrace",
    hta_table=False,
    hta_quirks=False,
    launch_apis=LAUNCH_APIS - _MEMORY_LAUNCH_APIS,
    memory_launch_apis=_MEMORY_LAUNCH_APIS,
)
#: HTA 0.6.1 exactly, its known bugs included.
HTA = RuleSet(
    "hta",
    hta_table=True,
    hta_quirks=True,
    launch_apis=HTA_LAUNCH_STATS_APIS,
    memory_launch_apis=HTA_MEMORY_LAUNCH_STATS_APIS,
)
#: HTA's tables and definitions with holotrace's fixes of HTA's bugs (the facade's default).
HTA_FIXED = RuleSet(
    "hta-fixed",
    hta_table=True,
    hta_quirks=False,
    launch_apis=NATIVE.launch_apis,
    memory_launch_apis=NATIVE.memory_launch_apis,
)


# Call-stack rules (HTA's backward-thread link, spec 12 §1.2): the main thread is the one with ``ProfilerStep#``
# ranges, the backward thread the one with ``autograd::`` ops; backward ops hang under ``## backward ##``.
def is_step_range_name(name: str) -> bool:
    """A ``ProfilerStep#…`` range (HTA's main-thread marker and fallback backward parent)."""
    return name.startswith("ProfilerStep#")


def is_autograd_name(name: str) -> bool:
    """An autograd engine op (HTA's backward-thread marker)."""
    return "autograd::" in name


def is_backward_annotation(name: str) -> bool:
    """A ``## backward ##`` annotation (HTA's parent for the backward thread's top-level ops)."""
    return name.startswith("## backward ##")


# ATen-op analysis (spec 23 §2): operators are the events named ``aten::…`` (any category, any thread); the launch
# calls under them are HTA's kernel-launch symbols (matched at the start of the name, as HTA's symbol table does),
# plus, outside HTA's quirks, every non-memory launch API of the rule set (HIP, graphs).
ATEN_OP_PREFIX = "aten::"


def is_aten_op(name: str) -> bool:
    """An ATen operator event (``aten::…``)."""
    return name.startswith(ATEN_OP_PREFIX)


def is_aten_launch(name: str, rules: RuleSet) -> bool:
    """A launch call the ATen-op analysis attributes to its enclosing operator, under ``rules``."""
    return HTA_ATEN_LAUNCH.match(name) is not None or (not rules.hta_quirks and name in rules.launch_apis)


# Critical path (spec 25): node categories, the CUDA runtime-lock calls, blocking calls (HTA's queue-length launch
# set is HTA_LAUNCH_APIS).
CP_NODE_CATEGORIES = frozenset({"cpu_op", "cuda_runtime", "cuda_driver"})
CP_LOCK_NAMES = frozenset({"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"})
CP_BLOCKING_NAMES = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
    }
)


def is_data_loading(name: str, patterns: Sequence[str], *, regex: bool = False) -> bool:
    """The data-loading rule (critical path ``data_load_events``): the name contains one of ``patterns``; with
    ``regex`` (HTA's ``bound_by`` rule, spec 25 §5) a pattern is a regular expression searched in the name."""
    if regex:
        return any(re.search(p, name) for p in patterns)
    return any(p in name for p in patterns)


def is_cp_node_category(cat: str, rules: RuleSet) -> bool:
    """A category whose events are critical-path nodes (outside HTA's quirks also every ``*_runtime``, e.g. MTIA)."""
    return cat in CP_NODE_CATEGORIES or (not rules.hta_quirks and cat.endswith("_runtime"))


# HTA's event-category patterns (hta.common.types, 0.6.1; matched at the start of a category, as ``re.match``).
HTA_STEP_GROUPING = HTA_PROFILER_STEP
HTA_MTIA_MEMORY_KERNEL = re.compile(r"(^dma)")
HTA_CATEGORY_PATTERNS: dict[str, str] = {
    "KERNEL_CATEGORY_PATTERN": r"(kernel)|(gpu_mem.+)|(mtia_ccp_events)",
    "KERNEL_LAUNCH_CATEGORY_PATTERN": r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)",
    "CPU_OP_CATEGORY_PATTERN": r"(cpu_op)|(user_annotation)",
    "DEVICE_RUNTIME_CATEGORY_PATTERN": r"(cuda_runtime)|(mtia_runtime)",
    "MEMORY_CATEGORY_PATTERN": r"(gpu_mem.+)|(mtia_ccp_events)",
    "GPU_EVENT_CATEGORY_PATTERN": r"(.*kernel)|(^gpu_mem)|(^mtia_ccp_events)|(^cuda_sync)",
    "CPU_EVENTS_CATEGORY_PATTERN": r"(cpu_op)|(user_annotation)|(^(.+)_runtime)",
    "CPU_AND_GPU_EVENTS_CATEGORY_PATTERN": r"(cpu_op)|(user_annotation)|(cuda_runtime)|(.*kernel)|(^gpu_mem)"
    r"|(^mtia_ccp_events)|(^cuda_sync)",
    "PYTHON_FUNCTION_PATTERN": r"(python_function)",
    "ALL_CATEGORY_PATTERN": r".*",
    "CUDA_SYNC_PATTERN": r"(cuda_sync)",
}


# CUPTI range-profiler counters (spec 24 §7): each range (this category) is paired, by position, with the
# launch calls whose category starts with ``cuda_runtime`` and whose name starts with ``cudaLaunchKernel``.
CUPTI_RANGE_CATEGORY = "cuda_profiler_range"
CUPTI_MISSING_NAME = "__missing__"


def is_cupti_launch_name(name: str) -> bool:
    """The name of a launch call paired with a CUPTI counter range (``cudaLaunchKernel*``)."""
    return name.startswith("cudaLaunchKernel")


def is_cupti_launch_category(cat: str) -> bool:
    """The category of a launch call paired with a CUPTI counter range (``cuda_runtime*``)."""
    return cat.startswith("cuda_runtime")
