"""Decoding details: pieces, parallelism, formats, side tables, all args."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import holotrace
from corpus import shared_or_skip
from holotrace.ingest.decode import decode_file
from holotrace.schema import ID_COLUMNS
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
        assert (
            a.strings.decode(a.rank(r).columns["name"]).tolist() == b.strings.decode(b.rank(r).columns["name"]).tolist()
        )


def test_side_tables_counters_memory_flows_names(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("k", 10, 5, 20, 30)
    tb.raw({"ph": "C", "name": "queue", "pid": 0, "tid": 7, "ts": 15, "args": {"length": 3, "bytes": 10.5}})
    tb.raw(
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 100,
            "tid": 1,
            "ts": 12,
            "s": "t",
            "args": {
                "Device Type": 1,
                "Device Id": 0,
                "Addr": 1234,
                "Bytes": 512,
                "Total Allocated": 4096,
                "Total Reserved": 8192,
            },
        }
    )
    t = holotrace.load(tb.write(tmp_path / "t.json"), cache=False).rank(0)
    c = t.counters
    assert sorted(c["value"].tolist()) == [3.0, 10.5]
    m = t.instants
    assert (
        m["mem_bytes"].tolist() == [512]
        and m["mem_total_allocated"].tolist() == [4096]
        and m["mem_addr"].tolist() == [1234]
    )
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


def _doc(tmp_path, events, name="t.json"):
    f = tmp_path / name
    f.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}, ensure_ascii=False))
    return f


def test_times_are_exact_nanoseconds_from_the_decimal_text(tmp_path):
    # 1.7e15 µs is 1.7e18 ns, beyond float64's 2^53: only the decimal text gives the last digits
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": 1}
        for n, ts in [
            ("epoch", 1700000000123456.789),
            ("exp", 1.5e3),
            ("half_even_down", 0.0005),
            ("half_even_up", 0.0015),
        ]
    ]
    f = tmp_path / "t.json"
    text = json.dumps({"traceEvents": evs}).replace("1700000000123456.8", "1700000000123456.789")
    f.write_text(text)
    d = decode_file(f)
    got = dict(zip(_text(d, d.events["name"]), d.events["ts_ns"].tolist()))
    assert got == {"epoch": 1700000000123456789, "exp": 1500000, "half_even_down": 0, "half_even_up": 2}
    assert d.ts_is_float


def test_mixed_type_fields(tmp_path):
    k = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}
    evs = [
        {**k, "pid": "Spans", "args": {"stream": "0x0", "correlation": "42"}},
        {**k, "tid": "7", "args": {"stream": 7, "correlation": 3.0}},
        {**k, "args": {"correlation": 2.5, "External id": 18446744073709551615}},
    ]
    d = decode_file(_doc(tmp_path, evs))
    ev = d.events
    assert ev["pid"].tolist() == [-1, 0, 0] and ev["tid"].tolist() == [7, 7, 7]
    assert ev["stream"].tolist() == [-1, 7, -1]
    assert ev["correlation"].tolist() == [42, 3, -1]
    assert ev["external_id"].tolist() == [-1, -1, -1]  # 2^64-1 as an unsigned id wraps to -1, as int64 holds it
    bad = [p for p in d.problems if p.code == "bad_arg_type"]
    assert len(bad) == 1 and bad[0].count == 1 and "correlation" in bad[0].message and bad[0].example == "2.5"


def test_integers_of_every_length_and_pretty_printing(tmp_path):
    """Integers of 1-20 digits (the scanner reads up to 19 digits without overflow checks), 2^63..2^64-1 wrapping
    to negative as unsigned ids do, integral floats; the same with indentation and tabs."""
    values = [
        7,
        123456789012345678,
        1234567890123456789,
        9223372036854775807,
        -9223372036854775808,
        12345678901234567890,
        18446744073709551615,
    ]
    want = [v - 2**64 if v >= 2**63 else v for v in values]
    evs = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": v, "tid": 1, "ts": 1, "dur": 1} for v in values]
    evs.append({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1.5e1, "tid": 1, "ts": 1, "dur": 1})
    want.append(15)
    for indent in (None, 1, "\t", 20):
        f = tmp_path / "t.json"
        f.write_text(json.dumps({"traceEvents": evs}, indent=indent))
        d = decode_file(f)
        assert d.events["pid"].tolist() == want, indent
        assert d.events["tid"].tolist() == [1] * len(want)


def test_escaped_strings_and_category_args(tmp_path):
    evs = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": 'a"b\u00e9\U0001f600',
            "pid": 1,
            "tid": 1,
            "ts": 1,
            "dur": 2,
            "args": {"correlation": 5, "Input Dims": [[1, 2], []], "External id": 9},
        }
    ]
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"traceEvents": evs}))  # ensure_ascii: \\u escapes, a surrogate pair among them
    d = decode_file(f)
    assert _text(d, d.events["name"]) == ['a"b\u00e9\U0001f600']
    assert _text(d, d.events["input_dims"]) == ["[[1, 2], []]"]
    assert d.events["external_id"].tolist() == [9]
    assert d.events["correlation"].tolist() == [-1]  # cpu ops do not carry a correlation (category rule)


@pytest.mark.parametrize("gz", [False, True])
def test_cuts_inside_strings_are_repaired(tmp_path, gz):
    """Names that look like event boundaries: pieces cut there are joined again, on any thread count."""
    tb = TraceBuilder(rank=0)
    for i in range(400):
        tb.cpu_op('x"},{"ph":"X",' + "y" * (i % 13), i * 10, 5, input_dims=[[1], [2]])
    f = tb.write(tmp_path / ("t.json.gz" if gz else "t.json"), compact=True)
    whole = decode_file(f, chunk_bytes=1 << 30)
    assert len(whole.events["ts_ns"]) == 400
    for chunk, workers in ((97, 1), (997, 2), (4096, 3)):
        d = decode_file(f, chunk_bytes=chunk, workers=workers)
        assert d.n_trace_events == whole.n_trace_events
        for col, arr in whole.events.items():
            if col in ID_COLUMNS["events"]:
                assert _text(whole, arr) == _text(d, d.events[col]), col
            else:
                assert np.array_equal(arr, d.events[col]), col
        assert not d.problems


@pytest.mark.parametrize("gz", [False, True])
def test_metadata_after_the_events_spanning_pieces(tmp_path, gz):
    """Keys written after traceEvents (lists of objects among them) are read whatever the piece size."""
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(50)
    ]
    props = [{"id": k, "name": "H100", "totalGlobalMem": 85e9} for k in range(40)]
    text = json.dumps({"schemaVersion": 1, "traceEvents": evs, "deviceProperties": props, "baseTimeNanoseconds": 17})
    f = tmp_path / ("t.json.gz" if gz else "t.json")
    f.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    for chunk, workers in ((1 << 30, 1), (64, 1), (300, 2)):
        d = decode_file(f, chunk_bytes=chunk, workers=workers)
        assert len(d.events["ts_ns"]) == 50 and not d.problems
        assert (
            d.meta["deviceProperties"] == props and d.meta["baseTimeNanoseconds"] == 17 and d.meta["schemaVersion"] == 1
        )


def test_the_scanner_refuses_to_scan_before_it_is_configured():
    """The compiled scanner, loaded alone in a fresh process (nothing has configured its arg keys), raises
    instead of scanning with an empty key table."""
    import subprocess
    import sys

    from holotrace.ingest import _scan

    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('_scan', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "try:\n"
        '    m.scan(b\'{"traceEvents": [{"ph": "X", "args": {"a": 1}}]}\')\n'
        "except RuntimeError as e:\n"
        "    print('refused:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, _scan.__file__], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused: scan() before configure()")
