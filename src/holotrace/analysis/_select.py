"""Event selections used by the native analyses (on ``RankTrace.events``)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.errors import RankNotFoundError
from holotrace.model.classify import GPU_ACTIVITY, KernelType, kernel_type_of_names

__all__ = ["decode", "gpu_activity", "hta_kernel_types", "job_ranks", "KernelType"]

_GPU_ACTIVITY_CODES = [int(k) for k in GPU_ACTIVITY]


def gpu_activity(events: pd.DataFrame) -> np.ndarray:
    """Mask of GPU work: kernels, memcpy and memset (sync events and stream-carrying CPU ops excluded)."""
    return np.isin(events["kind"].to_numpy(), _GPU_ACTIVITY_CODES)


def job_ranks(job, ranks: Optional[Sequence[int]] = None) -> list[int]:
    """The ranks to analyse: ``ranks`` (checked against the job) or every rank, ascending."""
    available = list(job.ranks)
    if ranks is None:
        return sorted(available)
    missing = [r for r in ranks if r not in set(available)]
    if missing:
        raise RankNotFoundError(
            f"rank {missing[0]} is not in this job (ranks: {available})",
        )
    return [int(r) for r in ranks]



def decode(job, ids: np.ndarray) -> np.ndarray:
    """Decode string ids into an object array of str (``""`` for −1)."""
    return job.strings.decode(np.asarray(ids))


def hta_kernel_types(names) -> np.ndarray:
    """HTA's kernel type code of each full kernel name (rule table in HTA mode), one rule pass per distinct name."""
    codes, uniques = pd.factorize(pd.Series(np.asarray(names, dtype=object)), use_na_sentinel=True)
    table = kernel_type_of_names([str(u) for u in uniques], hta_compat=True)
    out = np.full(codes.shape[0], int(KernelType.OTHER), dtype=np.int8)
    ok = codes >= 0
    out[ok] = table[codes[ok]]
    return out
