"""Event selections used by the native analyses (on ``RankTrace.events``)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.errors import RankNotFoundError
from holotrace.model.classify import GPU_ACTIVITY, KernelType, kernel_type_of_names

__all__ = ["decode", "gpu_activity", "hta_kernel_types", "hta_stream_rows", "job_ranks", "name_codes", "name_mask", "KernelType"]

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
    """HTA's kernel type code of each full kernel name (rule table in HTA mode), one rule pass per distinct name.

    ``names`` may be any array of str, or a :class:`pandas.Categorical` (then only its categories are classified).
    """
    if isinstance(names, pd.Categorical):
        codes, uniques = names.codes, names.categories
    else:
        codes, uniques = pd.factorize(pd.Series(np.asarray(names, dtype=object)), use_na_sentinel=True)
    table = kernel_type_of_names([str(u) for u in uniques], hta_compat=True)
    out = np.full(codes.shape[0], int(KernelType.OTHER), dtype=np.int8)
    ok = codes >= 0
    out[ok] = table[codes[ok]]
    return out


def hta_stream_rows(df: pd.DataFrame) -> np.ndarray:
    """Positions of the rows of an HTA table that carry a stream (GPU activity and the like)."""
    return np.flatnonzero(df["stream"].to_numpy() != -1)


def name_codes(df: pd.DataFrame, rows: np.ndarray, id_column: str = "name", text_column: str = "s_name") -> pd.Categorical:
    """The decoded names (``s_name``) of ``rows`` of an HTA table, as a Categorical of the distinct names.

    When the table has integer name ids (``name``, as HTA's and holotrace's tables do), the rows are
    grouped by id and only one string per distinct name is read, so no Python string is made per row.
    """
    ids = df[id_column].to_numpy() if id_column in df.columns else None
    if ids is not None and ids.dtype.kind in "iu":
        codes, _ = pd.factorize(ids[rows])
        # factorize numbers values in order of first appearance: a row is a first one where its code is new
        first = np.flatnonzero(codes > np.maximum.accumulate(np.r_[-1, codes[:-1]])) if len(codes) else codes
        text = np.asarray(df[text_column].array.take(rows[first]), dtype=object) if len(first) else np.empty(0, dtype=object)
        # ids and names are 1:1 in a loaded table; re-factorize the few names to stay exact otherwise
        again, names = pd.factorize(pd.Series(text, dtype=object))
        codes = again[codes] if len(codes) else codes.astype(np.int64)
    else:
        codes, names = pd.factorize(pd.Series(np.asarray(df[text_column].to_numpy()[rows], dtype=object), dtype=object))
    return pd.Categorical.from_codes(codes, categories=pd.Index(np.asarray(names, dtype=object), dtype=object))


def name_mask(df: pd.DataFrame, test, column: str = "s_name") -> np.ndarray:
    """Boolean mask over every row of an HTA table: ``test(name)`` for its ``s_name`` (or ``s_cat``).

    ``test`` is a set of names or a predicate; it is evaluated once per distinct name.
    """
    cat = name_codes(df, np.arange(len(df)), {"s_name": "name", "s_cat": "cat"}.get(column, ""), column)
    names = [str(x) for x in cat.categories]
    hit = np.array([n in test for n in names] if isinstance(test, (set, frozenset)) else [bool(test(n)) for n in names],
                   dtype=bool)
    codes = np.asarray(cat.codes)
    out = np.zeros(len(codes), dtype=bool)
    ok = codes >= 0
    out[ok] = hit[codes[ok]]
    # a missing name reads as "" (as fillna(""))
    if (~ok).any():
        out[~ok] = ("" in test) if isinstance(test, (set, frozenset)) else bool(test(""))
    return out
