"""Decoding details: pieces, parallelism, formats, side tables, all args."""

from __future__ import annotations

import json

import numpy as np
import pytest

import holotrace
from holotrace.ingest.decode import decode_file
from holotrace.schema import ID_COLUMNS
from conftest import shared_or_skip
from tracebuilder import TraceBuilder


def _big(tmp_path, n=3000, gz=False, compact=False):
    tb = TraceBuilder(rank=0)
    for s in range(3):
        tb.annotation(f"ProfilerStep#{s}", s * 100_000, 100_000)
    for i in range(n):
        t = i * 30.125
        tb.cpu_op("aten::mm", t, 20, input_dims=[[8, 16], [16, 4]], input_type=["float", "float"])
        tb.launch_kernel(f"gemm_{i % 5}", t + 1, 3, t + 5, 10.5, stream=7 + i % 2)
    return tb.write(tmp_path / ("t.json.gz" if gz else "t.json"), compact=compact)


def _text(d, ids):
    return [d.strings[i] if i >= 0 else None for i in ids.tolist()]


@pytest.mark.parametrize("gz,compact", [(False, False), (True, False), (False, True)])
def test_pieces_and_workers_give_identical_tables(tmp_path, gz, compact):
    f = _big(tmp_path, gz=gz, compact=compact)
    whole = decode_file(f, chunk_bytes=1 << 30)
    pieces = decode_file(f, chunk_bytes=1 << 16)
    parallel = decode_file(f, chunk_bytes=1 << 16, workers=2)
    for d in (pieces, parallel):
        assert d.n_trace_events == whole.n_trace_events
        for col, arr in whole.events.items():
            if col in ID_COLUMNS["events"]:
                assert _text(whole, arr) == _text(d, d.events[col]), col
            else:
                assert np.array_equal(arr, d.events[col]), col
    assert whole.events["index"].tolist() == sorted(whole.events["index"].tolist())
    ev = whole.events
    dims = set(_text(whole, ev["input_dims"])) - {None}
    assert dims == {"[[8,16],[16,4]]"} or dims == {"[[8, 16], [16, 4]]"}


def test_file_pool_equals_sequential(tmp_path):
    for r in range(3):
        tb = TraceBuilder(rank=r, world_size=3)
        tb.annotation("ProfilerStep#1", 0, 100)
        tb.launch_kernel(f"k{r}", 10, 5, 20, 30)
        tb.write(tmp_path)
    a = holotrace.load(tmp_path, cache=False, workers=1)
    b = holotrace.load(tmp_path, cache=False, workers=3)
    assert a.ranks == b.ranks == [0, 1, 2]
    for r in a.ranks:
        assert a.strings.decode(a.rank(r).columns["name"]).tolist() == b.strings.decode(b.rank(r).columns["name"]).tolist()


def test_side_tables_counters_memory_flows_names(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("k", 10, 5, 20, 30)
    tb.raw({"ph": "C", "name": "queue", "pid": 0, "tid": 7, "ts": 15, "args": {"length": 3, "bytes": 10.5}})
    tb.raw({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100, "tid": 1, "ts": 12, "s": "t",
            "args": {"Device Type": 1, "Device Id": 0, "Addr": 1234, "Bytes": 512, "Total Allocated": 4096, "Total Reserved": 8192}})
    t = holotrace.load(tb.write(tmp_path / "t.json"), cache=False).rank(0)
    c = t.counters
    assert sorted(c["value"].tolist()) == [3.0, 10.5]
    m = t.instants
    assert m["mem_bytes"].tolist() == [512] and m["mem_total_allocated"].tolist() == [4096] and m["mem_addr"].tolist() == [1234]
    f = t.flows
    assert len(f) == 2 and set(f["flow_id"].tolist()) == {1000}
    assert len(t.names) == 2


def test_all_args_keeps_raw_args(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("op", 1, 2, **{"Some new arg": [1, 2, 3], "Record function id": 77})
    t = holotrace.load(tb.write(tmp_path / "t.json"), cache=False, all_args=True).rank(0)
    raw = [json.loads(x) for x in t.raw_args if x]
    assert raw[0]["Some new arg"] == [1, 2, 3] and raw[0]["Record function id"] == 77


def test_every_corpus_job_loads():
    shared = shared_or_skip()
    bad = {}
    for job in sorted(p for p in (shared / "traces").iterdir() if p.is_dir()):
        try:
            j = holotrace.load(job, cache=False)
            assert j.ranks and all(j.rank(r).n_events > 0 for r in j.ranks)
        except holotrace.HolotraceError as e:
            bad[job.name] = str(e)
    # the only folder without a Kineto trace holds PyTorch's memory-timeline array
    assert set(bad) == {"hta_memory_analysis"}, bad
    assert "JSON array that is not a list of trace events" in bad["hta_memory_analysis"]
