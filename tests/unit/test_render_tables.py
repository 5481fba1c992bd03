"""Text tables fit the terminal; markdown, JSON records and file writers keep the values."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from holotrace.render.tables import format_markdown, format_table, kernel_label, shorten, to_records, write_frames


def test_table_fits_80_columns_by_shortening_text():
    df = pd.DataFrame(
        {
            "kernel": ["void " + "x" * 150 + "_tail(float*)", "short"],
            "total ms": [1234.5, 2.0],
            "count": np.array([3, 4], dtype=np.int64),
        }
    )
    text = format_table(df, width=80, title="Top")
    lines = text.splitlines()
    assert lines[0] == "Top" and max(len(line) for line in lines) <= 80
    assert "…" in lines[3] and lines[3].rstrip().endswith("1,234.50      3")


def test_numbers_nan_and_empty():
    df = pd.DataFrame({"rank": [0, 1], "pct": [12.345, np.nan], "ok": [True, False]})
    text = format_table(df, digits={"pct": 1})
    assert "12.3" in text and " -" in text and "yes" in text and "no" in text
    assert format_table(df.iloc[:0], title="T") == "T\n  (none)"
    assert format_table(pd.DataFrame({"a": range(5)}), max_rows=2).endswith("… 3 more rows")


def test_markdown_and_records():
    df = pd.DataFrame({"name": ["a|b"], "v": [np.float64("nan")], "n": np.array([2], dtype=np.int64)})
    md = format_markdown(df)
    assert md.splitlines()[0] == "| name | v | n |" and "a\\|b" in md
    assert to_records(df) == [{"name": "a|b", "v": None, "n": 2}]
    assert json.dumps(to_records(df))


def test_write_frames_round_trip(tmp_path):
    df = pd.DataFrame({"rank": [0, 1], "idle_us": [1.5, np.nan]})
    paths = write_frames({"temporal": df}, tmp_path / "o", ["csv", "parquet", "json"])
    assert [p.name for p in paths] == ["temporal.csv", "temporal.parquet", "temporal.json"]
    pd.testing.assert_frame_equal(pd.read_parquet(paths[1]), df)
    pd.testing.assert_frame_equal(pd.read_csv(paths[0]), df)
    assert json.loads(paths[2].read_text()) == [{"rank": 0, "idle_us": 1.5}, {"rank": 1, "idle_us": None}]


def test_labels():
    assert shorten("abcdefghij", 5) == "ab…ij" and shorten("abc", 5) == "abc"
    assert kernel_label("void at::native::vectorized_kernel<4>(int, float*)") == "at::native::vectorized_kernel<4>"
    assert kernel_label("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
