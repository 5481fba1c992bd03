"""Event selections used by the native analyses (on ``RankTrace.events``)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.errors import RankNotFoundError

__all__ = ["decode", "gpu_activity", "job_ranks", "GPU_ACTIVITY_KINDS"]


def _kinds():
    from holotrace.model.classify import Kind

    return (int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET))


GPU_ACTIVITY_KINDS = None  # resolved lazily: the model may import analysis helpers


def gpu_activity(events: pd.DataFrame) -> np.ndarray:
    """Mask of GPU work: kernels, memcpy and memset (sync events and stream-carrying CPU ops excluded)."""
    global GPU_ACTIVITY_KINDS
    if GPU_ACTIVITY_KINDS is None:
        GPU_ACTIVITY_KINDS = _kinds()
    return np.isin(events["kind"].to_numpy(), GPU_ACTIVITY_KINDS)


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
    """Decode string ids into an object array of str (``""`` for −1), one lookup per distinct id."""
    ids = np.asarray(ids)
    if ids.size == 0:
        return np.empty(0, dtype=object)
    uniq, inv = np.unique(ids, return_inverse=True)
    table = job.strings.table
    values = np.array([table[i] if i >= 0 else "" for i in uniq.tolist()], dtype=object)
    return values[inv]
