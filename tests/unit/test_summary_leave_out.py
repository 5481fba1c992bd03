"""A job's summary with frames left out: those frames empty (with their columns), every other frame the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import holotrace
from holotrace.analysis.job_summary import summarize_job
from holotrace.analysis.rank_summary import LEAVE_OUT_ABLE, rank_summary
from holotrace.table import Table

JOB = Path(__file__).resolve().parents[1] / "data" / "traces" / "hta_trace_filter_2rank"


def test_frames_left_out_are_empty_and_the_others_the_same():
    job = holotrace.load(JOB, cache=False)
    full = summarize_job(job).frames
    some = summarize_job(job, leave_out=LEAVE_OUT_ABLE).frames
    assert full.keys() == some.keys()
    for k in full:
        if not isinstance(full[k], (Table, dict)) or k == "launch_overview":
            assert full[k] == some[k], k
            continue
        a, b = Table.of(full[k]), Table.of(some[k])
        assert list(a.columns) == list(b.columns), k
        if k in LEAVE_OUT_ABLE:
            assert len(a) > 0 and len(b) == 0, k  # (the full summary has rows: leaving out is seen)
            continue
        assert len(a) == len(b), k
        for c in a.columns:
            x, y = np.asarray(a[c]), np.asarray(b[c])
            assert x.dtype == y.dtype and (np.array_equal(x, y, equal_nan=x.dtype.kind == "f")), (k, c)


def test_only_the_detail_frames_can_be_left_out():
    job = holotrace.load(JOB, cache=False)
    with pytest.raises(ValueError, match="temporal"):
        rank_summary(job, job.ranks[0], leave_out=("temporal",))
