"""The small table type of the command paths (holotrace.table) and the renderers that read it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from holotrace.render.tables import format_markdown, format_table, to_records
from holotrace.table import Table, is_frame

SRC = Path(__file__).resolve().parents[2] / "src"

ROWS = [
    {"severity": "warning", "code": "a", "rank": 1, "count": 3, "share": 0.5, "ok": True, "example": None},
    {"severity": "error", "code": "b", "rank": None, "count": 1, "share": 2, "ok": False, "example": "x|y"},
    {"severity": "info", "code": "c", "rank": 7, "count": 0, "share": float("nan"), "ok": True, "example": "z"},
]
COLS = ["severity", "code", "rank", "count", "share", "ok", "example"]


def test_records_are_typed_as_a_frame_of_the_same_rows():
    t = Table.from_records(ROWS, COLS)
    f = pd.DataFrame(ROWS, columns=COLS)
    assert t.columns == COLS and len(t) == 3
    for c in ("rank", "count", "share", "ok"):  # numbers and booleans: the frame's numpy dtype
        assert t[c].dtype == f[c].to_numpy().dtype, c
    assert t["rank"].dtype == np.float64 and np.isnan(t["rank"][1])  # an int column with a None: float, NaN
    assert t["count"].dtype == np.int64
    assert t["severity"].dtype == object and t["example"][0] is None
    # what the renderers make of either is the same
    assert to_records(t) == to_records(f)
    assert format_table(t, digits={"share": 1}) == format_table(f, digits={"share": 1})
    assert format_markdown(t, title="x") == format_markdown(f, title="x")


def test_records_from_sequences_and_no_rows():
    t = Table.from_records([("a", 1), ("b", 2)], ["k", "v"])
    assert t["k"].tolist() == ["a", "b"] and t["v"].dtype == np.int64
    empty = Table.from_records([], ["k", "v"])
    assert len(empty) == 0 and empty.empty and empty.columns == ["k", "v"]
    assert to_records(empty) == [] and format_table(empty, title="t") == "t\n  (none)"


def test_rows_taken_and_cut():
    t = Table({"a": [3, 1, 2], "b": ["x", "y", "z"]})
    assert t["b"].dtype == object  # text stays Python strings
    assert t.take([2, 0])["b"].tolist() == ["z", "x"]
    assert t.take(t["a"] > 1)["a"].tolist() == [3, 2]
    assert t.head(2)["a"].tolist() == [3, 1] and len(t.head(5)) == 3
    assert t.records() == [(3, "x"), (1, "y"), (2, "z")]
    with pytest.raises(ValueError, match="differ in length"):
        Table({"a": [1, 2], "b": [1]})


def test_frames_read_as_tables_and_back():
    f = pd.DataFrame({"x": [1.5, 2.5], "n": ["a", "b"]}, index=[10, 20])
    assert is_frame(f) and not is_frame(Table()) and not is_frame({"x": 1})
    t = Table.of(f)
    assert t["x"].tolist() == [1.5, 2.5] and t["n"].tolist() == ["a", "b"]
    assert Table.of(t) is t
    back = t.to_pandas()
    assert list(back.columns) == ["x", "n"] and back["x"].tolist() == [1.5, 2.5] and list(back.index) == [0, 1]
    assert json.dumps(to_records(t)) == json.dumps(to_records(f))


def test_the_table_and_the_renderers_do_not_import_pandas():
    code = (
        "import sys; import holotrace.table, holotrace.render.tables, holotrace.commands._output; "
        "from holotrace.render.tables import format_table; from holotrace.table import Table; "
        "format_table(Table({'a': [1.0], 'b': ['x']})); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(SRC)}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
