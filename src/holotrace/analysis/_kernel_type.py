"""Kernel-type codes for analyses, by name.

TODO(model): a stand-in until ``holotrace.model.classify`` lands; then this
module only re-exports ``classify.kernel_type_of_names`` and ``KernelType``.
"""

from __future__ import annotations

import re
from enum import IntEnum

import numpy as np
import pandas as pd

try:  # pragma: no cover - depends on the lead's model being present
    from holotrace.model.classify import KernelType, kernel_type_of_names  # type: ignore
except ImportError:  # TODO(model)

    class KernelType(IntEnum):  # type: ignore[no-redef]
        COMMUNICATION = 0
        MEMORY = 1
        COMPUTATION = 2
        OTHER = 3

    _COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
    _MEM = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
    _NOT_COMP = re.compile(
        r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)"
        r"|(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)"
        r"|(^collective_subgraph_execution)"
    )

    def _one(name: str) -> int:
        if _COMM.match(name):
            return KernelType.COMMUNICATION
        if _MEM.match(name):
            return KernelType.MEMORY
        if not _NOT_COMP.match(name):
            return KernelType.COMPUTATION
        return KernelType.OTHER

    def kernel_type_of_names(names) -> np.ndarray:  # type: ignore[no-redef]
        """Kernel type code of every name (classified once per distinct name)."""
        codes, uniques = pd.factorize(pd.Series(np.asarray(names, dtype=object)), use_na_sentinel=True)
        table = np.array([_one(str(u)) for u in uniques], dtype=np.int8)
        out = np.full(codes.shape[0], KernelType.OTHER, dtype=np.int8)
        ok = codes >= 0
        out[ok] = table[codes[ok]]
        return out

__all__ = ["KernelType", "kernel_type_of_names"]
