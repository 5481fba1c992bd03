"""The job-wide string table: decoding ids of every integer width."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from holotrace.compat.hta_table import text_column
from holotrace.model.strings import StringTable


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_missing_ids_decode_to_the_fill_value_whatever_the_id_width(dtype):
    # 300 strings: the fill position (300) does not fit in int8, where a careless np.where wraps to 44
    table = StringTable(f"s{i}" for i in range(300))
    ids = np.array([1, -1, 5], dtype=dtype)
    assert table.decode(ids, empty="none").tolist() == ["s1", "none", "s5"]
    assert table.mask(ids, lambda s: s == "s44").tolist() == [False, False, False]
    assert table.lookup(ids, np.arange(300), -7).tolist() == [1, -7, 5]
    assert list(text_column(table, ids, "-1")) == ["s1", "-1", "s5"]


def test_text_column_has_pandas_default_text_dtype():
    table = StringTable(["a", "b"])
    col = pd.Series(text_column(table, np.array([1, 0, -1])))
    assert col.dtype == pd.Series(["x"]).dtype
    assert col.tolist() == ["b", "a", ""]
