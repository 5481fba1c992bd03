"""The id-based fast paths of the facade give the same results as the general paths on HTA tables.

The facade passes the job's string table and numpy column dicts; any caller with plain DataFrames
takes the general path. Both must agree exactly, on real bundled traces.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from holotrace import TraceAnalysis
from holotrace.analysis import annotations, launches, stragglers

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
JOBS = ["hta_with_gpu_user_annotation", "hta_trace_filter_2rank", "hta_amd_mi250", "hta_nccl_parser_config"]


@pytest.fixture(scope="module", params=JOBS)
def analyser(request, tmp_path_factory):
    return TraceAnalysis(trace_dir=str(TRACES / request.param), cache=False)


def test_annotation_breakdown_by_id_equals_general_path(analyser):
    for category in ("gpu_user_annotation", "user_annotation"):
        if analyser.job.strings.id(category) < 0:
            continue
        general = annotations.hta_user_annotation_breakdown(analyser._frames(), category)
        fast = annotations.hta_user_annotation_breakdown(analyser._frames(), category, strings=analyser.job.strings,
                                                          columns=analyser._columns())
        assert len(fast) > 0
        pd.testing.assert_frame_equal(fast, general, check_exact=False, rtol=1e-12)


@pytest.mark.parametrize("compat", [False, True])
@pytest.mark.parametrize("memory", [False, True])
def test_launch_stats_by_id_equals_general_path(analyser, compat, memory):
    for r in analyser.job.ranks:
        general = launches.add_flags(launches.hta_launch_stats(analyser._frame(r), memory, hta_compat=compat), 50, 100)
        fast = launches.hta_launch_stats(analyser._frame(r), memory, hta_compat=compat, strings=analyser.job.strings,
                                         columns=analyser._columns([r])[r], flags=(50, 100))
        pd.testing.assert_frame_equal(fast, general)


@pytest.mark.parametrize("compat", [False, True])
def test_stragglers_cut_per_rank_equal_stacked_scoring(analyser, compat):
    frames = analyser._frames()
    steps = stragglers.hta_profiler_step_numbers(frames)
    assert steps == stragglers.hta_profiler_step_numbers(analyser._columns(), analyser.job.strings.table)
    if not steps:
        pytest.skip("no ProfilerStep in this job")
    stacked = pd.concat([f[np.isin(f["iteration"].to_numpy(), steps)].assign(rank=np.int64(r)) for r, f in frames.items()],
                        ignore_index=True)
    s1, m1 = stragglers.hta_straggler_scores(stacked, 2, hta_compat=compat)
    s2, m2 = stragglers._default_scores(analyser._columns(), sorted(frames), steps, 2, compat, analyser.job.strings.table)
    pd.testing.assert_series_equal(s2, s1, check_names=False)
    if len(m1):
        pd.testing.assert_frame_equal(m2.reset_index(drop=True), m1.reset_index(drop=True), check_dtype=False)
