"""The decoder gives the same tables whatever the chunk size it reads the file in.

``decode_file`` reads a file in chunks and decodes whole events cut at event boundaries.
Random traces (built with the trace builder, written plain or gzipped, compact, spaced or
indented, as an object or a bare event array) are decoded with a single chunk and with
tiny ones that cut inside strings, escapes, multi-byte characters and numbers; every table,
the string table, the metadata and the problems must be identical. Event names include
``},{`` and quotes so that a cut can fall on text that looks like an event boundary.
"""

from __future__ import annotations

import dataclasses
import gzip
import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest
from _profiles import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from holotrace.ingest import decode as decode_mod
from holotrace.ingest.decode import decode_file
from holotrace.schema import ID_COLUMNS
from tracebuilder import TraceBuilder

WHOLE = 1 << 30
TINY = (1, 2, 3, 5, 17, 64, 4096)

_TRICKY = ["},{", '"},{"ph":"X"', "\\", '\\"', "]", "[{", ",", "é", "中文", "😀", "\n", "\t", "\u2028", "\x01"]
names = st.one_of(
    st.sampled_from(["aten::mm", "gemm_kernel", "ncclKernel_AllReduce", "Memcpy HtoD", "ProfilerStep#3"]),
    st.lists(
        st.one_of(st.sampled_from(_TRICKY), st.text(st.characters(blacklist_categories=("Cs",)), max_size=4)),
        min_size=1,
        max_size=4,
    ).map("".join),
)


def _decode(path: Path, chunk: int, all_args: bool):
    """``decode_file`` with the given chunk size (its ``chunk_bytes`` parameter, else the module's constant)."""
    if "chunk_bytes" in inspect.signature(decode_file).parameters:
        return decode_file(path, all_args=all_args, chunk_bytes=chunk)
    if hasattr(decode_mod, "CHUNK_BYTES"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(decode_mod, "CHUNK_BYTES", chunk)
            return decode_file(path, all_args=all_args)
    pytest.fail("decode_file offers no way to set the chunk size (a chunk_bytes parameter or CHUNK_BYTES)")


# ---------------------------------------------------------------------------- random traces


@st.composite
def event_specs(draw):
    kind = draw(
        st.sampled_from(
            [
                "cpu_op",
                "annotation",
                "gpu_annotation",
                "launch",
                "memcpy",
                "counter",
                "memory",
                "python",
                "thread_name",
                "begin_end",
                "instant",
            ]
        )
    )
    return (
        kind,
        draw(names),
        draw(st.integers(0, 10**6)),
        draw(st.integers(0, 5000)),
        draw(st.integers(0, 3)),
        draw(st.integers(-(2**40), 2**40)),
    )


@st.composite
def traces(draw):
    clock = draw(st.sampled_from(["int", "float", "epoch_int", "epoch_float"]))
    specs = draw(st.lists(event_specs(), min_size=0, max_size=30))
    layout = draw(st.sampled_from(["compact", "spaced", "indented", "array"]))
    return {
        "clock": clock,
        "specs": specs,
        "layout": layout,
        "gz": draw(st.booleans()),
        "ascii": draw(st.booleans()),
        "nan": False,
        "all_args": draw(st.booleans()),
    }


def _time(clock: str, us: int, frac: int):
    base = 1_700_000_000_000_000 if clock.startswith("epoch") else 0
    if clock.endswith("float"):
        return base + us + (frac % 1000) / 1000
    return base + us


def _build(t: dict) -> TraceBuilder:
    tb = TraceBuilder(rank=0, world_size=2)
    for i, (kind, name, us, dur, k, big) in enumerate(t["specs"]):
        ts = _time(t["clock"], us, big)
        if kind == "cpu_op":
            tb.cpu_op(
                name,
                ts,
                dur,
                tid=1 + k,
                input_dims=[[k, big % 97], []],
                input_type=["float", name],
                sequence_number=big,
            )
        elif kind == "annotation":
            tb.annotation(name, ts, dur, tid=1 + k)
        elif kind == "gpu_annotation":
            tb.annotation(name, ts, dur, tid=7 + k, cat="gpu_user_annotation")
        elif kind == "launch":
            tb.launch_kernel(
                name, ts, 1 + k, _time(t["clock"], us + 3, big), dur, stream=7 + k, grid=[k, 1, 1], block=[128, 1, 1]
            )
        elif kind == "memcpy":
            tb.launch_kernel(
                name,
                ts,
                2,
                _time(t["clock"], us + 5, big),
                dur,
                stream=7,
                cat="gpu_memcpy",
                launch_name="cudaMemcpyAsync",
                bytes=abs(big),
                memory_bw=dur / 7,
            )
        elif kind == "counter":
            value = float("nan") if t["nan"] and k == 0 else big / 3
            tb.raw({"ph": "C", "name": name, "pid": 0, "tid": k, "ts": ts, "args": {"length": k, "value": value}})
        elif kind == "memory":
            tb.raw(
                {
                    "ph": "i",
                    "cat": "cpu_instant_event",
                    "name": "[memory]",
                    "pid": 100,
                    "tid": 1,
                    "ts": ts,
                    "s": "t",
                    "args": {
                        "Device Type": 1,
                        "Device Id": 0,
                        "Addr": abs(big),
                        "Bytes": big,
                        "Total Allocated": abs(big) * 2,
                        "Total Reserved": abs(big) * 3,
                    },
                }
            )
        elif kind == "python":
            tb.raw(
                {
                    "ph": "X",
                    "cat": "python_function",
                    "name": name,
                    "pid": 100,
                    "tid": 1,
                    "ts": ts,
                    "dur": dur,
                    "args": {"Python id": i, "Python parent id": max(i - 1, 0)},
                }
            )
        elif kind == "thread_name":
            tb.raw({"name": "thread_name", "ph": "M", "ts": 0, "pid": 100, "tid": 2 + k, "args": {"name": name}})
        elif kind == "begin_end":
            tb.raw({"ph": "B" if k % 2 else "E", "name": name, "pid": 100, "tid": 1, "ts": ts})
        else:
            tb.raw({"ph": "i", "cat": "cpu_instant_event", "name": name, "pid": 100, "tid": 1, "ts": ts, "s": "t"})
    return tb


def _write(t: dict, folder: Path) -> Path:
    doc = _build(t).document()
    if t["layout"] == "array":
        doc = doc["traceEvents"]
    kw = {"ensure_ascii": t["ascii"]}
    if t["layout"] == "compact":
        kw["separators"] = (",", ":")
    elif t["layout"] == "indented":
        kw["indent"] = 1
    data = json.dumps(doc, **kw).encode("utf-8")
    path = folder / ("t.json.gz" if t["gz"] else "t.json")
    path.write_bytes(gzip.compress(data) if t["gz"] else data)
    return path


# ---------------------------------------------------------------------------- comparison


TABLES = ("events", "instants", "counters", "flows", "names")


def comparable(d) -> dict:
    """Every field of a decoded file, string-id columns as their text (ids are file-local intern order)."""
    out = {}
    for f in dataclasses.fields(d):
        value = getattr(d, f.name)
        if f.name == "path":
            continue
        if f.name == "strings":
            value = sorted(value)
        elif f.name in TABLES:
            ids = ID_COLUMNS.get(f.name, ())
            value = {
                c: ([d.strings[i] if i >= 0 else None for i in a.tolist()] if c in ids else a) for c, a in value.items()
            }
        elif f.name == "ids_used" and value is not None:  # masks over file-local ids: the strings they mark
            value = {
                t: {c: sorted(d.strings[i] for i in np.flatnonzero(m)) for c, m in cols.items()}
                for t, cols in value.items()
            }
        out[f.name] = value
    return out


def assert_same_tables(a, b, where: str) -> None:
    assert_same(comparable(a), comparable(b), where)


def assert_same(a, b, where: str = "decoded") -> None:
    """Equal values, recursively; numpy arrays equal in dtype and content (NaN equal to NaN)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{where}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


# ---------------------------------------------------------------------------- tests

ONE_OF_EACH = {
    "clock": "epoch_float",
    "layout": "spaced",
    "gz": False,
    "ascii": False,
    "nan": False,
    "all_args": True,
    "specs": [
        (k, n, 10 * i, 5, i % 4, 12345 * (i + 1))
        for i, (k, n) in enumerate(
            [
                ("cpu_op", "aten::mm"),
                ("annotation", "},{"),
                ("gpu_annotation", "ProfilerStep#1"),
                ("launch", '"},{"ph":"X"'),
                ("memcpy", "Memcpy HtoD"),
                ("counter", "queue"),
                ("memory", "m"),
                ("python", "中文😀"),
                ("thread_name", "worker\\"),
                ("begin_end", "b"),
                ("instant", "i"),
            ]
        )
    ],
}


@settings(max_examples=examples(40))
@given(traces(), st.integers(1, 512))
@example(ONE_OF_EACH, 7)
@example({**ONE_OF_EACH, "clock": "int", "layout": "compact", "gz": True, "ascii": True}, 1)
@example({**ONE_OF_EACH, "layout": "array", "nan": False, "all_args": False}, 2)
@example(  # a phase's letter seen first as a name: the phase counts' order once depended on the pieces
    {
        "clock": "int",
        "specs": [
            ("cpu_op", "E", 0, 0, 0, 0),
            ("launch", "aten::mm", 0, 0, 0, 0),
            ("begin_end", "aten::mm", 0, 0, 0, 0),
        ],
        "layout": "compact",
        "gz": False,
        "ascii": False,
        "nan": False,
        "all_args": False,
    },
    1,
)
def test_same_tables_whatever_the_chunk_size(tmp_path_factory, t, drawn):
    path = _write(t, tmp_path_factory.mktemp("trace"))
    whole = _decode(path, WHOLE, t["all_args"])
    assert whole.n_trace_events == len(_build(t).document()["traceEvents"])
    for chunk in TINY + (drawn,):
        assert_same_tables(whole, _decode(path, chunk, t["all_args"]), f"chunk_bytes={chunk}")


def test_tiny_chunks_on_a_longer_trace(tmp_path):
    """Many events of every kind, one byte at a time: still the single-chunk tables."""
    t = {**ONE_OF_EACH, "specs": ONE_OF_EACH["specs"] * 40}
    path = _write(t, tmp_path)
    whole = _decode(path, WHOLE, True)
    assert whole.n_trace_events == len(_build(t).document()["traceEvents"])
    assert len(whole.events["ts_ns"]) > 300
    assert_same_tables(whole, _decode(path, 1, True), "chunk_bytes=1")
    assert_same_tables(whole, _decode(path, 333, True), "chunk_bytes=333")


# NaN literals (non-standard JSON, written by some exporters) go through the decoder's fallback path.
_NAN = {"clock": "int", "gz": False, "ascii": True, "nan": True, "all_args": False}
NAN_CASES = {
    # the NaN sits in the last piece (the tail), which a single-chunk read decodes too
    "nan_in_the_tail": {
        **_NAN,
        "layout": "compact",
        "specs": [("cpu_op", "x", 0, 5, 1, 7), ("counter", "queue", 3, 0, 0, 9)],
    },
    # a bare event array whose only NaN event is last: non-standard JSON, not a truncated file
    "nan_in_a_bare_array": {**_NAN, "layout": "array", "specs": [("counter", "queue", 3, 0, 0, 9)]},
}


@pytest.mark.parametrize("case", sorted(NAN_CASES))
def test_nan_literals_whatever_the_chunk_size(tmp_path, case):
    t = NAN_CASES[case]
    path = _write(t, tmp_path)
    results = [_decode(path, chunk, False) for chunk in (WHOLE, 1, 17)]
    for r in results:
        assert [p.code for p in r.problems] == ["non_standard_json"]
        assert np.isnan(r.counters["value"]).sum() == 1
        assert r.n_trace_events == len(_build(t).document()["traceEvents"])
    for r in results[1:]:
        assert_same_tables(results[0], r, "nan")
