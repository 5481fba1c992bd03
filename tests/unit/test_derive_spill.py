"""Derivation over a spill whose columns are in files writes each chunk's derived columns on a thread of its own:
the same columns as derivation in memory, whatever the chunk, and an error of the writing reaches the caller."""

from __future__ import annotations

import numpy as np
import pytest

from holotrace.ingest.decode import decode_into
from holotrace.ingest.store import Spill
from holotrace.model import derive as derive_mod
from holotrace.model.derive import DERIVED, derive, derive_columns
from tracebuilder import TraceBuilder


def _trace(tmp_path):
    tb = TraceBuilder(rank=0)
    for s in range(4):
        tb.annotation(f"ProfilerStep#{s}", s * 10_000, 10_000)
    for i in range(300):
        t = i * 130
        tb.cpu_op("aten::mm", t, 20)
        tb.launch_kernel(f"gemm_{i % 5}", t + 1, 3, t + 40, 30, stream=7 + i % 2)
    return tb.write(tmp_path / "t.json")


@pytest.mark.parametrize("chunk", [7, 64, 1 << 16])
def test_derived_in_files_equal_derived_in_memory(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(derive_mod, "cpu_count", lambda: 2)  # (the thread writes whatever the machine)
    path = _trace(tmp_path)
    with Spill(tmp_path, memory=0) as spill:
        d = decode_into(path, spill)
        assert not spill.in_memory
        n = spill.rows("events")
        given = {c: spill.read("events", c) for c in spill.columns("events")}
        derive(spill, d.strings, chunk=chunk)
        got = {c: spill.read("events", c) for c in DERIVED}
    want = derive_columns(given, d.strings)
    assert n > 900 and set(want) == set(DERIVED)
    for c in DERIVED:
        np.testing.assert_array_equal(got[c], want[c], err_msg=c)


def test_an_error_of_the_writing_thread_is_raised(tmp_path, monkeypatch):
    path = _trace(tmp_path)
    with Spill(tmp_path, memory=0) as spill:
        d = decode_into(path, spill)
        monkeypatch.setattr(derive_mod, "cpu_count", lambda: 2)  # (the thread writes whatever the machine)
        real = spill.append

        def append(table, columns):
            if "partner" in columns:
                raise OSError(28, "No space left on device")
            real(table, columns)

        monkeypatch.setattr(spill, "append", append)
        with pytest.raises(OSError, match="No space left"):
            derive(spill, d.strings, chunk=64)
