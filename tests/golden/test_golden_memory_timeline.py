"""HTA's MemoryAnalysis on a PyTorch memory-timeline export, against HTA 0.6.1's memory_timeline.csv."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from corpus import SHARED
from holotrace import MemoryAnalysis
from holotrace.errors import TraceFormatError

RAW = SHARED / "traces" / "hta_memory_analysis" / "memory_timeline.raw.gz"
GOLDEN = SHARED / "golden" / "hta_memory_analysis" / "memory_timeline.csv"


@pytest.fixture
def analysis():
    if not RAW.is_file():
        pytest.skip("shared corpus not present")
    return MemoryAnalysis(str(RAW))


def test_matches_golden(analysis):
    golden = pd.read_csv(GOLDEN)
    ours = analysis.timeline(hta_compat=True)
    assert list(ours.columns) == list(golden.columns)
    assert len(ours) == len(golden) == 7721
    # the golden dump orders rows by ts (its two rows at the first instant swapped): compare as sorted rows
    key = list(golden.columns)
    a = golden.sort_values(key).reset_index(drop=True)
    b = ours.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def test_hta_lists(analysis):
    times, sizes = analysis._process_raw_events()
    assert len(times) == 7721 and times[0] == times[1]
    assert sizes[0] == [102440608, 102228128, 19395584, 0, 0, 0, 0, 107996584]
    assert sizes[744] == [102440608, 102228128, 19395584, 0, 2618160128, 58417152, 41811968, 25494440]
    assert sizes[-1] == [102440608, 102228128, 19395584, 0, 128000, 107868160, 0, 424]


def test_fixed_merges_first_instant_and_peaks(analysis):
    df = analysis.timeline()
    assert len(df) == 7720 and df["ts"].is_monotonic_increasing and df["ts"].is_unique
    peaks = analysis.peaks().set_index("category")
    assert peaks.loc["Activation", "peak_bytes"] == df["Activation"].max()
    assert peaks.loc["Total", "peak_bytes"] == df.drop(columns="ts").sum(axis=1).max()


def test_plain_json_and_bad_input(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps([[-1, 1, 100, 0], [10, 2, 50, 4], [10, 3, 25, 4], [20, 4, -50, 4]]))
    df = MemoryAnalysis(str(p)).timeline()
    assert df["ts"].tolist() == [10, 20]
    assert df["Parameter"].tolist() == [100, 100] and df["Activation"].tolist() == [75, 25]
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b"[[1, 2, 3, 9]]"))
    with pytest.raises(TraceFormatError, match="category 9"):
        MemoryAnalysis(str(bad)).timeline()
