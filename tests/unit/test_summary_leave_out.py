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


def _printed(argv: list[str], *, full: bool) -> str:
    """``holotrace summary`` printed; ``full``: every frame computed, whatever the output shows."""
    import contextlib
    import io

    from holotrace.cli import build_parser
    from holotrace.commands import summary
    from holotrace.commands._output import emit

    args = build_parser(["summary"]).parse_args(["summary", *argv])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if full:
            emit(summary.build_report(summary.job_summary_of_args(args)), args)
        else:
            summary.run(args)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_the_printed_summary_is_the_same_without_the_detail_frames(fmt):
    argv = [str(JOB), "--no-cache", "--format", fmt, "--width", "120"]
    assert _printed(argv, full=False) == _printed(argv, full=True)


def test_the_full_frames_are_made_when_written():
    import json

    doc = json.loads(_printed([str(JOB), "--no-cache", "--format", "json"], full=False))
    for k in LEAVE_OUT_ABLE:
        assert len(doc[k]) > 0, k
