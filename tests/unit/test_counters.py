"""Queue length, blocked time, memory bandwidth, augmented traces and CUPTI FLOPs on hand-built traces
(every value worked out by hand)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

import holotrace
from holotrace import CUDA_SASS_INSTRUCTION_COUNTER_FLOPS, TimeSeriesTypes, TraceAnalysis
from holotrace.analysis import counters, cupti
from holotrace.model.classify import NATIVE
from tracebuilder import TraceBuilder


def _trace() -> TraceBuilder:
    """Launch call start → GPU operation [start, end), µs:

    stream 7: k1 10 → [20, 30), k2 12 → [30, 40), k3 14 → [50, 55), k4 30 → [60, 61)  (k4's launch and k2's
              start tie at 30: +1 before -1)
    stream 9: k5 16 → [18, 20)
    copies:   HtoD 2 GB/s [100, 110) stream 11, HtoD 3 GB/s [105, 120) stream 12, DtoH 1 GB/s [100, 100) stream 11
    """
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("k1", 10, 1, 20, 10)
    tb.launch_kernel("k2", 12, 1, 30, 10)
    tb.launch_kernel("k3", 14, 1, 50, 5)
    tb.launch_kernel("k5", 16, 1, 18, 2, stream=9)
    tb.launch_kernel("k4", 30, 1, 60, 1)
    for name, cpu, ts, dur, stream, bw in (
        ("Memcpy HtoD (Pageable -> Device)", 90, 100, 10, 11, 2.0),
        ("Memcpy HtoD (Pageable -> Device)", 91, 105, 15, 12, 3.0),
        ("Memcpy DtoH (Device -> Pageable)", 92, 100, 0, 11, 1.0),
    ):
        tb.launch_kernel(
            name,
            cpu,
            1,
            ts,
            dur,
            stream=stream,
            cat="gpu_memcpy",
            launch_name="cudaMemcpyAsync",
            **{"memory bandwidth (GB/s)": bw},
        )
    return tb


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctr")
    _trace().write(d, gz=True)
    return holotrace.load(d, cache=False)


def test_queue_length_two_streams_hand_worked(job):
    q = counters.queue_length(job, rules=NATIVE)[0]
    s7 = q[q["stream"] == 7]
    assert (s7["ts"] // 1000).tolist() == [10, 12, 14, 20, 30, 30, 50, 60]
    assert s7["queue_length"].tolist() == [1, 2, 3, 2, 3, 2, 1, 0]
    s9 = q[q["stream"] == 9]
    assert (s9["ts"] // 1000).tolist() == [16, 18] and s9["queue_length"].tolist() == [1, 0]
    assert q.index.name == "index" and q["stream"].is_monotonic_increasing
    assert counters.queue_length_findings({0: q}) == []


def test_queue_length_summary_and_time_weighted(job):
    q = counters.queue_length(job, rules=NATIVE)
    summ = counters.queue_length_summary(q, time_weighted=True)
    row = summ.loc[(0, 7), "queue_length"]
    assert row["count"] == 8 and row["max"] == 3 and row["mean"] == pytest.approx(14 / 8)
    # time-weighted over [10, 60] µs: 1*2 + 2*2 + 3*6 + 2*10 + 3*0 + 2*20 + 1*10 = 94 → 94 / 50
    assert row["time_mean"] == pytest.approx(94 / 50)
    assert "rank" not in q[0].columns  # the caller's frames are not modified


def test_blocked_on_full_queue_small_limit(job):
    out = counters.time_blocked_on_full_queue(job, rules=NATIVE, max_queue_length=3)
    # stream 7 holds 3 from 14 to 20 µs (and for 0 µs at 30): 6 µs of a trace spanning 10 → 92 µs (starts)
    assert out[["rank", "stream"]].values.tolist() == [[0, 7]]
    assert out["duration_at_max_queue_length"].iloc[0] == 6000
    assert out["relative_duration_at_max_queue_length"].iloc[0] == pytest.approx(6 / 95)
    # HTA's quirk keeps one stream per rank (its last qualifying one)
    two = counters.time_blocked_on_full_queue(job, rules=NATIVE, max_queue_length=1)
    assert sorted(two["stream"].tolist()) == [7, 9, 11, 12]
    ta = TraceAnalysis(job=job)
    quirky = ta.get_time_spent_blocked_on_full_queue(
        ta.get_queue_length_time_series(), max_queue_length=1, hta_compat=True
    )
    assert quirky["stream"].tolist() == [12]


def test_memory_bandwidth_overlapping_copies(job):
    m = counters.memory_bandwidth(job, rules=NATIVE)[0]
    h = m[m["name"] == "Memcpy HtoD"]
    assert (h["ts"] // 1000).tolist() == [100, 105, 110, 120]
    np.testing.assert_allclose(h["memory_bw_gbps"], [2.0, 5.0, 3.0, 0.0])
    d = m[m["name"] == "Memcpy DtoH"]  # zero duration lasts 1 µs
    assert (d["ts"] // 1000).tolist() == [100, 101] and d["memory_bw_gbps"].tolist() == [1.0, 0.0]
    summ = counters.memory_bandwidth_summary({0: m})
    assert summ.loc[(0, "Memcpy HtoD"), ("memory_bw_gbps", "count")] == 3
    assert summ.loc[(0, "Memcpy HtoD"), ("memory_bw_gbps", "mean")] == pytest.approx(10 / 3)
    ta = TraceAnalysis(job=job)
    hta = ta.get_memory_bw_time_series()[0]
    assert hta["ts"].dtype == np.float64 and hta["memory_bw_gbps"].max() == 5.0


def test_empty_results_without_gpu_work(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::add", 0, 10)
    tb.write(tmp_path)
    ta = TraceAnalysis(trace_dir=str(tmp_path), cache=False)
    assert ta.get_queue_length_time_series() == {}
    assert ta.get_queue_length_summary() is None and ta.get_memory_bw_summary() is None
    assert ta.get_time_spent_blocked_on_full_queue({}).empty
    assert ta.get_cupti_counter_data_with_operators() == []
    ta.generate_trace_with_counters()
    assert len(list(tmp_path.iterdir())) == 1  # no series: no file


def test_negative_queue_length_is_a_finding(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("k", 20, 1, 10, 5)  # GPU start before its launch call: clocks disagree
    tb.write(tmp_path)
    j = holotrace.load(tmp_path, cache=False)
    q = counters.queue_length(j)
    assert q[0]["queue_length"].tolist() == [-1, 0]  # kept, not clamped
    (f,) = counters.queue_length_findings(q)
    assert f.code == "negative_queue_length" and f.rank == 0 and f.count == 1


def test_augmented_trace_round_trip_and_derived_skip(tmp_path):
    src = _trace().write(tmp_path, gz=True)
    ta = TraceAnalysis(trace_dir=str(tmp_path), cache=False)
    ta.generate_trace_with_counters()
    out = tmp_path / "rank-0.pt.trace_with_counters.json.gz"
    doc = json.loads(gzip.decompress(out.read_bytes()))
    orig = json.loads(gzip.decompress(src.read_bytes()))
    added = doc["traceEvents"][len(orig["traceEvents"]) :]
    assert doc["traceEvents"][: len(orig["traceEvents"])] == orig["traceEvents"]
    assert {k: v for k, v in doc.items() if k != "traceEvents"} == {k: v for k, v in orig.items() if k != "traceEvents"}
    q = [e for e in added if e["name"] == "Queue Length"]
    assert len(q) == len(ta.get_queue_length_time_series()[0]) == 8 + 2 + 3 * 2  # streams 7, 9 and 3 copies
    assert q[0] == {"ph": "C", "name": "Queue Length", "pid": 0, "ts": 10, "id": 7, "args": {"Queue Length": 1}}
    bw = [e for e in added if e["name"] == "Memcpy HtoD"]
    assert [e["args"]["Memcpy BW"] for e in bw] == [2.0, 5.0, 3.0, 0.0]
    # loads back: the same events plus the counter tracks
    back = holotrace.load(out, cache=False)
    first = holotrace.load(src, cache=False)
    assert back.rank(0).n_events == first.rank(0).n_events
    assert len(back.rank(0).counters) > len(first.rank(0).counters)
    # the folder now holds both: one rank, the derived file skipped with an info finding
    both = holotrace.load(tmp_path, cache=False)
    assert both.ranks == [0] and not [f for f in both.findings if f.code == "duplicate_rank"]
    note = [f for f in both.findings if f.code == "skipped_file" and f.severity == "info"]
    assert note and out.name in note[0].message


def test_augmented_plain_json_stays_plain_and_output_dir(tmp_path):
    _trace().write(tmp_path / "in")
    ta = TraceAnalysis(trace_dir=str(tmp_path / "in"), cache=False)
    ta.generate_trace_with_counters(
        time_series=TimeSeriesTypes.MEMCPY_BANDWIDTH, output_dir=str(tmp_path / "out"), output_suffix="_bw"
    )
    out = tmp_path / "out" / "rank-0.pt.trace_bw.json"
    raw = out.read_bytes()
    assert raw[:1] == b"{"  # not gzip: the name does not end in .gz
    names = {e["name"] for e in json.loads(raw)["traceEvents"] if e.get("ph") == "C"}
    assert names == {"Memcpy HtoD", "Memcpy DtoH"}
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == ["rank-0.pt.trace.json"]


def test_cupti_flops_hand_worked():
    assert CUDA_SASS_INSTRUCTION_COUNTER_FLOPS["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"] == 2
    assert CUDA_SASS_INSTRUCTION_COUNTER_FLOPS["smsp__sass_thread_inst_executed_op_dadd_pred_on.sum"] == 1
    f = pd.DataFrame(
        {
            "index": [1, 2, 3],
            "name": ["a", "b", "c"],
            "top_level_op": ["op1", "op1", "op2"],
            "bottom_level_op": ["x", "y", "z"],
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": [10, 0, -1],
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": [4, 6, 1],
            "dram__bytes_read.sum": [8, 3, 0],
            "dram__bytes_write.sum": [4, 3, 0],
        }
    )
    kernels, ops = cupti.flops(f)
    assert kernels["flops"].tolist() == [24, 6, 1]  # 2*10 + 4; 6; absent (-1) counts 0
    np.testing.assert_allclose(kernels["arithmetic_intensity"], [2.0, 1.0, np.nan])
    assert ops["top_level_op"].tolist() == ["op1", "op2"] and ops["flops"].tolist() == [30, 1]
    assert ops["arithmetic_intensity"].iloc[0] == pytest.approx(30 / 18)


def test_writer_keeps_metadata_after_events(tmp_path):
    from holotrace.render import trace_file

    p = tmp_path / "t.json"
    p.write_text('{"a": [1], "traceEvents": [{"ph": "X"}], "x": [{"b": 1}], "y": "]"}')
    trace_file.write_trace_with_events(p, tmp_path / "o.json", ['{"ph": "C"}'], top_keys=["a", "x", "y", "traceEvents"])
    doc = json.loads((tmp_path / "o.json").read_text())
    assert doc == {"a": [1], "traceEvents": [{"ph": "X"}, {"ph": "C"}], "x": [{"b": 1}], "y": "]"}


def test_writer_large_plain_file_reads_only_its_ends(tmp_path):
    from holotrace.render import trace_file

    p = tmp_path / "big.json"
    events = [{"ph": "X", "name": "a" * 1000, "args": {"x": "]}, {"}} for _ in range(3000)]  # over 3 MB
    doc = {"schemaVersion": 1, "traceEvents": events, "traceName": "]", "extra": [{"k": [1]}]}
    p.write_text(json.dumps(doc))
    out = trace_file.write_trace_with_events(
        p,
        tmp_path / "o.json",
        ['{"ph": "C", "name": "n"}'],
        top_keys=["schemaVersion", "traceName", "extra", "traceEvents"],
    )
    back = json.loads(out.read_text())
    assert back["traceEvents"][:-1] == events and back["traceEvents"][-1] == {"ph": "C", "name": "n"}
    assert {k: back[k] for k in ("schemaVersion", "traceName", "extra")} == {
        "schemaVersion": 1,
        "traceName": "]",
        "extra": [{"k": [1]}],
    }
