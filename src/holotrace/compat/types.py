"""HTA's classification patterns and kernel helpers (``hta.common.types``, ``hta.utils.utils``), answered by
holotrace's one rule table (:mod:`holotrace.model.classify`): the regexes are the rule table's own objects.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np
import pandas as pd

from holotrace.analysis import intervals
from holotrace.model import classify
from holotrace.model.classify import KernelType
from holotrace.text import hta_short_names as shorten_names

__all__ = [
    "GroupingPattern",
    "to_grouping_pattern",
    "ProfilerStepGroupingPattern",
    "MemoryKernelGroupingPattern",
    "MTIAMemoryKernelGroupingPattern",
    "CommunicateKernelGroupingPattern",
    "ComputeKernelGroupingPattern",
    "common_grouping_patterns",
    "DeviceType",
    "MemcpyType",
    "MEMCPY_TYPE_TO_STR",
    "KernelType",
    "IdleTimeType",
    "infer_device_type",
    "shorten_name",
    "get_kernel_type",
    "get_memory_kernel_type",
    "is_comm_kernel",
    "is_memory_kernel",
    "is_compute_kernel",
    "is_computer_kernel",
    "merge_kernel_intervals",
    "flatten_column_names",
    "get_symbol_column_names",
    *classify.HTA_CATEGORY_PATTERNS,
]


@dataclass(frozen=True)
class GroupingPattern:
    """A regex matched at the start of a name (``re.match``), optionally inverted."""

    pattern: re.Pattern
    inverse_match: bool = False
    group_name: str = field(default="", compare=False)

    def __post_init__(self):
        if isinstance(self.pattern, str):
            object.__setattr__(self, "pattern", re.compile(self.pattern))

    def match(self, name: str) -> bool:
        return (self.pattern.match(name) is not None) != self.inverse_match

    def __hash__(self):
        return hash((self.pattern.pattern, self.pattern.flags, self.inverse_match))


def to_grouping_pattern(
    pattern: Union[str, list[str], re.Pattern, GroupingPattern],
    group_name: Optional[str] = None,
    inverse_match: Optional[bool] = None,
) -> GroupingPattern:
    if isinstance(pattern, GroupingPattern):
        return pattern
    if isinstance(pattern, list):
        pattern = "|".join(f"({p})" for p in pattern)
    if isinstance(pattern, (str, re.Pattern)):
        return GroupingPattern(
            re.compile(pattern) if isinstance(pattern, str) else pattern, bool(inverse_match), group_name or ""
        )
    raise ValueError(f"Unsupported pattern type {type(pattern)}")


ProfilerStepGroupingPattern = GroupingPattern(classify.HTA_STEP_GROUPING, False, "profiler_steps")
MemoryKernelGroupingPattern = GroupingPattern(classify.hta_kernel_pattern(KernelType.MEMORY), False, "memory_kernels")
MTIAMemoryKernelGroupingPattern = GroupingPattern(classify.HTA_MTIA_MEMORY_KERNEL, False, "memory_kernels")
CommunicateKernelGroupingPattern = GroupingPattern(
    classify.hta_kernel_pattern(KernelType.COMMUNICATION), False, "communicate_kernels"
)
ComputeKernelGroupingPattern = GroupingPattern(
    classify.hta_kernel_pattern(KernelType.COMPUTATION), True, "compute_kernels"
)
common_grouping_patterns = {
    "memory_kernels": MemoryKernelGroupingPattern,
    "compute_kernels": ComputeKernelGroupingPattern,
    "communicate_kernels": CommunicateKernelGroupingPattern,
}
for _name, _rx in classify.HTA_CATEGORY_PATTERNS.items():
    globals()[_name] = GroupingPattern(re.compile(_rx), False, _name.lower())


class DeviceType(enum.Enum):
    """HTA's device selector, one enum for both of HTA's (``hta.common.types.DeviceType`` and
    ``hta.trace_diff.DeviceType``, which lacks UNKNOWN): what :func:`infer_device_type` answers and which rows
    ``TraceDiff`` compares (CPU: ``stream == -1``, GPU: ``stream != -1``, ALL: both)."""

    UNKNOWN = 0
    CPU = 1
    GPU = 2
    ALL = 3


class MemcpyType(enum.Enum):
    DTOD = 0
    DTOH = 1
    HTOD = 2
    UNKNOWN = 3


MEMCPY_TYPE_TO_STR = {
    MemcpyType.DTOD: "memcpy_dtod",
    MemcpyType.DTOH: "memcpy_dtoh",
    MemcpyType.HTOD: "memcpy_htod",
    MemcpyType.UNKNOWN: "memcpy_type_unknown",
}


class IdleTimeType(enum.Enum):
    HOST_WAIT = 0
    KERNEL_WAIT = 1
    OTHER = 2


def infer_device_type(df: pd.DataFrame) -> DeviceType:
    """HTA's device of a frame of one thread/stream (spec 12 §5.3)."""
    if "stream" not in df.columns:
        return DeviceType.UNKNOWN
    s = df["stream"]
    if "pid" in df.columns and "tid" in df.columns:
        if (s > 0).all() or (df["pid"] == 0).all() or (df["tid"] == 0).all():
            return DeviceType.GPU
    elif (s > 0).all():
        return DeviceType.GPU
    return DeviceType.CPU if (s == -1).all() else DeviceType.UNKNOWN


def shorten_name(name: str) -> str:
    """HTA's ``shorten_name``."""
    return str(shorten_names([name])[0])


def get_kernel_type(name: str) -> str:
    """``COMMUNICATION`` / ``MEMORY`` / ``COMPUTATION`` / ``OTHER`` by HTA's rules."""
    return classify.kernel_type_of_name(name, hta_compat=True).name


def is_comm_kernel(name: str) -> bool:
    return classify.hta_kernel_pattern(KernelType.COMMUNICATION).match(name) is not None


def is_memory_kernel(name: str) -> bool:
    return classify.is_memory_kernel_name(name)


def is_compute_kernel(name: str) -> bool:
    return classify.hta_kernel_pattern(KernelType.COMPUTATION).match(name) is None


is_computer_kernel = is_compute_kernel


def get_memory_kernel_type(name: str) -> str:
    if name[:6] == "Memset":
        return "Memset"
    if not name.startswith("Memcpy"):
        return "Memcpy Unknown"
    return name[:11]


def merge_kernel_intervals(kernel_df: pd.DataFrame) -> pd.DataFrame:
    """Merged ``[ts, end]`` intervals of the rows (touching intervals merge); sorts ``kernel_df`` by ``ts`` in
    place (rows with equal ``ts`` keep their order) and adds its ``end`` column, as HTA does."""
    df = kernel_df
    ordered = df.iloc[np.argsort(df["ts"].to_numpy(), kind="stable")]
    for i in range(df.shape[1]):
        df.isetitem(i, ordered.iloc[:, i].array)  # by position: duplicate labels, dtypes kept
    df.index = ordered.index
    df["end"] = df["ts"] + df["dur"]
    iv = intervals.merge(df["ts"].to_numpy(), df["end"].to_numpy())
    return pd.DataFrame({"ts": iv.start, "end": iv.end})


def flatten_column_names(df: pd.DataFrame) -> None:
    if isinstance(df.columns, pd.MultiIndex):
        df.columns = ["_".join(str(p) for p in col).rstrip("_") for col in df.columns.values]


def get_symbol_column_names(df: pd.DataFrame):
    def first(*cols):
        return next((c for c in cols if c in df.columns and pd.api.types.is_string_dtype(df[c])), "")

    return first("name", "s_name"), first("cat", "s_cat")
