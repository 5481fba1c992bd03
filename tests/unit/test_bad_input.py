"""Every kind of bad input gives a typed error (API) or a finding, never a crash or a silent number."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import holotrace
from holotrace import errors
from tracebuilder import TraceBuilder


def _good(tmp_path: Path, **kw) -> Path:
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 100)
    tb.launch_kernel("gemm", 10, 5, 20, 30)
    return tb.write(tmp_path / "good.json", **kw)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "holotrace.cli", *args], capture_output=True, text=True)


CASES = {
    "zero_byte": (b"", errors.TraceFormatError, "empty"),
    "whitespace_only": (b"   \n", errors.TraceFormatError, "empty"),
    "not_json": (b"hello world", errors.TraceFormatError, "not JSON"),
    "no_trace_events": (b'{"schemaVersion": 1, "foo": [1, 2]}', errors.TraceFormatError, "traceEvents"),
    "truncated_json_header": (b'{"schemaVersion": 1, "traceEv', errors.TraceFormatError, ""),
    "broken_events": (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": }]}', errors.TraceFormatError, "JSON"),
    "metadata_only": (
        b'{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}}]}',
        errors.TraceFormatError,
        "metadata only",
    ),
    "invalid_utf8": (
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "\xff\xfe", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}',
        errors.HolotraceError,
        "",
    ),
    "int_over_64_bits": (
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, '
        b'"args": {"correlation": 123456789012345678901234567890}}]}',
        errors.TraceEventError,
        "64 bits",
    ),
    "top_level_number": (b"42", errors.TraceFormatError, "not JSON"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_api_raises_typed_error(tmp_path, case):
    content, exc, words = CASES[case]
    f = tmp_path / "trace.json"
    f.write_bytes(content)
    with pytest.raises(exc) as ei:
        holotrace.load(f, cache=False)
    msg = str(ei.value)
    assert str(f) in msg and words in msg
    assert "\n" not in msg
    assert f.read_bytes() == content  # never modified


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_cli_one_line(tmp_path, case):
    content, _, _ = CASES[case]
    f = tmp_path / "trace.json"
    f.write_bytes(content)
    r = _cli("info", str(f), "--no-cache")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("holotrace: error:") and str(f) in lines[0]
    assert "Traceback" not in r.stderr


def test_missing_path(tmp_path):
    with pytest.raises(errors.TraceNotFoundError, match="does not exist"):
        holotrace.load(tmp_path / "nope")
    r = _cli("info", str(tmp_path / "nope"))
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_folder_without_traces(tmp_path):
    (tmp_path / "readme.txt").write_text("hello")
    (tmp_path / "data.json").write_text('{"a": 1}')
    with pytest.raises(errors.TraceNotFoundError, match="no PyTorch profiler trace"):
        holotrace.load(tmp_path)


@pytest.mark.skipif(
    os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root reads files whatever their mode"
)
def test_unreadable_file(tmp_path):
    f = _good(tmp_path)
    f.chmod(0)
    try:
        with pytest.raises(errors.TraceReadError, match="permission"):
            holotrace.load(f, cache=False)
    finally:
        f.chmod(0o644)


def test_unreadable_file_reported_as_read_error(tmp_path, monkeypatch):
    """Simulate EACCES (root cannot be denied by file mode)."""
    f = _good(tmp_path)
    real_open = os.open

    def deny(p, *a, **k):
        if str(p) == str(f):
            raise PermissionError(13, "Permission denied")
        return real_open(p, *a, **k)

    monkeypatch.setattr(os, "open", deny)
    with pytest.raises(errors.TraceReadError, match="not readable"):
        holotrace.load(f, cache=False)


def test_truncated_gzip_keeps_valid_part(tmp_path):
    tb = TraceBuilder(rank=0)
    for i in range(2000):
        tb.cpu_op(f"op{i % 7}", i * 10, 5)
    full = tb.write(tmp_path / "full.json.gz")
    data = full.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    job = holotrace.load(cut, cache=False)
    t = job.rank(0)
    assert 0 < t.n_events < 2000
    codes = {f.code for f in job.findings}
    assert "truncated_gzip" in codes and "truncated_json" in codes
    with pytest.raises(errors.HolotraceError):
        holotrace.load(cut, cache=False, strict=True)


def test_truncated_json_keeps_complete_events(tmp_path):
    tb = TraceBuilder(rank=0)
    for i in range(100):
        tb.cpu_op("op", i * 10, 5)
    f = tb.write(tmp_path / "t.json")
    text = f.read_bytes()
    cut_at = text.index(b'"ts": 500')  # inside the 51st op
    g = tmp_path / "cut.json"
    g.write_bytes(text[:cut_at])
    job = holotrace.load(g, cache=False)
    assert job.rank(0).n_events == 50
    f2 = [x for x in job.findings if x.code == "truncated_json"]
    assert f2 and f2[0].severity == "error" and "after 52 events" in f2[0].message  # 2 metadata events + 50 ops


def _events_doc(events: list[dict]) -> bytes:
    return json.dumps({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": events}).encode()


def test_missing_ts_or_dur(tmp_path):
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "dur": 2},
        {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 5},
    ]
    f = tmp_path / "t.json"
    f.write_bytes(_events_doc(evs))
    job = holotrace.load(f, cache=False)
    # an X event is an event with a duration: 'b' (no ts) and 'c' (no dur) are dropped with an error finding
    assert job.rank(0).n_events == 1
    fnd = [x for x in job.findings if x.code == "missing_time"]
    assert len(fnd) == 1 and fnd[0].count == 2 and fnd[0].example.startswith("event #1: name='b'")
    assert fnd[0].message.startswith("2 events with a duration have no ts or dur")
    with pytest.raises(errors.TraceEventError, match="missing"):
        holotrace.load(f, cache=False, strict=True)


def test_nan_and_negative_durations(tmp_path):
    text = (
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": NaN},'
        '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1, "dur": -5},'
        '{"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 1, "dur": 4}]}'
    )
    f = tmp_path / "t.json"
    f.write_text(text)
    job = holotrace.load(f, cache=False)
    t = job.rank(0)
    assert t.n_events == 1 and int(t.columns["dur_ns"][0]) == 4000
    codes = {x.code: x for x in job.findings}
    assert codes["missing_time"].count == 1 and codes["negative_duration"].count == 1
    with pytest.raises(errors.TraceEventError):
        holotrace.load(f, cache=False, strict=True)


def test_bad_gzip(tmp_path):
    f = tmp_path / "t.json.gz"
    f.write_bytes(b"\x1f\x8b\x08\x00garbage-garbage-garbage")
    with pytest.raises(errors.TraceReadError, match="gzip"):
        holotrace.load(f, cache=False)


def test_input_files_never_modified(tmp_path):
    f = _good(tmp_path, gz=True)
    before = (f.read_bytes(), f.stat().st_mtime_ns)
    holotrace.load(tmp_path)
    holotrace.load(tmp_path)  # cached
    assert (f.read_bytes(), f.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [f.name]  # no cache files beside the trace
