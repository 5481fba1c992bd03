"""gzip inflating: ISA-L's inflater (extra ``fast``) and the zlib fallback read the same columns and report the same
damage; the read-ahead thread keeps order, hands errors over in place and stops when the reader stops."""

from __future__ import annotations

import gzip
import threading
import zlib

import numpy as np
import pytest

from holotrace.ingest import _read
from holotrace.ingest.decode import decode_file
from holotrace.schema import ID_COLUMNS
from tracebuilder import TraceBuilder

try:
    from isal import isal_zlib
except ImportError:
    isal_zlib = None

# every inflater this installation has; zlib always
INFLATERS = [zlib] + ([isal_zlib] if isal_zlib is not None else [])


def _trace_text(tmp_path, n=4000) -> bytes:
    tb = TraceBuilder(rank=0)
    for s in range(3):
        tb.annotation(f"ProfilerStep#{s}", s * 200_000, 200_000)
    for i in range(n):
        t = i * 40.25
        tb.cpu_op("aten::mm", t, 20, input_dims=[[8, 16], [16, 4]], input_type=["float", "float"])
        tb.launch_kernel(f"gemm_{i % 7}", t + 1, 3, t + 5, 10.5, stream=7 + i % 2)
    return tb.write(tmp_path / "t.json").read_bytes()


def _columns(d) -> dict:
    out = {}
    for col, arr in d.events.items():
        if col in ID_COLUMNS["events"]:
            out[col] = [d.strings[i] if i >= 0 else None for i in arr.tolist()]
        else:
            out[col] = np.asarray(arr).tolist()
    return out


def _decode_with(monkeypatch, inflate, path, **kw):
    monkeypatch.setattr(_read, "INFLATE", inflate)
    d = decode_file(path, **kw)
    return _columns(d), sorted((p.code, p.message) for p in d.problems), d.n_trace_events


def test_the_default_inflater_is_isal_when_installed():
    assert _read.INFLATE is (isal_zlib if isal_zlib is not None else zlib)


@pytest.mark.parametrize("inflate", INFLATERS, ids=lambda m: m.__name__)
def test_gzip_decodes_to_the_plain_files_columns(tmp_path, monkeypatch, inflate):
    text = _trace_text(tmp_path)
    plain = tmp_path / "t.json"
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(text, compresslevel=3, mtime=0))
    want = _decode_with(monkeypatch, zlib, plain, chunk_bytes=1 << 15)
    for workers in (1, 2):
        got = _decode_with(monkeypatch, inflate, gz, chunk_bytes=1 << 15, workers=workers)
        assert got == want
    assert want[2] > 8000


@pytest.mark.parametrize("inflate", INFLATERS, ids=lambda m: m.__name__)
def test_several_members_truncation_damage_and_trailing_bytes(tmp_path, monkeypatch, inflate):
    text = _trace_text(tmp_path, n=1500)
    half = len(text) // 2
    whole = gzip.compress(text, mtime=0)
    cases = {
        "members": gzip.compress(text[:half], mtime=0) + gzip.compress(text[half:], mtime=0),
        "truncated": whole[: len(whole) * 2 // 3],
        "trailing": whole + b"not gzip at all",
        "damaged": whole[: len(whole) // 2] + bytes(64) + whole[len(whole) // 2 + 64 :],
    }
    for name, data in cases.items():
        f = tmp_path / f"{name}.json.gz"
        f.write_bytes(data)
        ref = _decode_with(monkeypatch, zlib, f, chunk_bytes=1 << 14)
        got = _decode_with(monkeypatch, inflate, f, chunk_bytes=1 << 14)
        if inflate is not zlib and name == "damaged":
            # the two libraries may notice damage a few bytes apart; both keep the events before it
            assert got[1] and {c for c, _ in got[1]} == {c for c, _ in ref[1]}
            assert abs(got[2] - ref[2]) <= 50
            continue
        assert got == ref, name
    codes = {c for c, _ in _decode_with(monkeypatch, inflate, tmp_path / "truncated.json.gz")[1]}
    assert "truncated_gzip" in codes
    assert _decode_with(monkeypatch, inflate, tmp_path / "members.json.gz")[1] == []


def test_read_ahead_keeps_order_and_raises_in_place():
    def items():
        yield from range(5)
        raise ValueError("broken at 5")

    got = []
    with pytest.raises(ValueError, match="broken at 5"):
        for x in _read.read_ahead(items(), depth=2):
            got.append(x)
    assert got == [0, 1, 2, 3, 4]


def test_read_ahead_stops_its_thread_when_the_reader_stops():
    closed = threading.Event()

    def endless():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    before = threading.active_count()
    it = _read.read_ahead(endless(), depth=3)
    assert [next(it) for _ in range(4)] == [0, 1, 2, 3]
    it.close()
    assert closed.wait(5)
    assert threading.active_count() == before


@pytest.mark.parametrize("inflate", INFLATERS, ids=lambda m: m.__name__)
def test_zero_padding_after_the_stream_is_not_damage(tmp_path, monkeypatch, inflate):
    """Zero bytes after the last member are gzip's padding (gzip and Python's gzip skip them): nothing is lost, no
    problem is reported, and the whole file's CRC is taken; bytes that are not all zero are still trailing data."""
    text = _trace_text(tmp_path, n=800)
    plain = tmp_path / "t.json"
    whole = gzip.compress(text, mtime=0)
    padded = tmp_path / "padded.json.gz"
    padded.write_bytes(whole + bytes(3 * 1024 * 1024 + 5))
    junk = tmp_path / "junk.json.gz"
    junk.write_bytes(whole + bytes(4096) + b"junk")
    want = _decode_with(monkeypatch, zlib, plain, chunk_bytes=1 << 14)
    got = _decode_with(monkeypatch, inflate, padded, chunk_bytes=1 << 14)
    assert got == want and want[1] == []
    assert decode_file(padded).content_crc32 == zlib.crc32(padded.read_bytes())
    cols, problems, n = _decode_with(monkeypatch, inflate, junk, chunk_bytes=1 << 14)
    assert (cols, n) == want[::2] and [c for c, _ in problems] == ["trailing_data"]
    assert decode_file(junk).content_crc32 is None  # the reading stopped before the file's end


@pytest.mark.skipif(isal_zlib is None, reason="ISA-L's file reader comes with the optional isal package")
def test_damage_after_the_fast_reader_gave_bytes_is_read_again_with_care(tmp_path, monkeypatch):
    """The fast reader meets a cut stream after many chunks: the careful reader takes over where it stopped, so the
    events before the cut are kept once each and the cut is reported as with zlib."""
    text = _trace_text(tmp_path, n=3000)
    whole = gzip.compress(text, mtime=0)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) * 9 // 10])
    calls = []
    fast = _read._fast_gzip
    monkeypatch.setattr(_read, "_fast_gzip", lambda *a: calls.append(1) or fast(*a))
    got = _decode_with(monkeypatch, isal_zlib, cut, chunk_bytes=1 << 14)
    assert calls and got == _decode_with(monkeypatch, zlib, cut, chunk_bytes=1 << 14)
    assert "truncated_gzip" in {c for c, _ in got[1]} and got[2] > 5000


def test_a_read_failing_in_the_padding_is_a_one_line_error(tmp_path, monkeypatch):
    """The zero padding after the stream is read to its end; a read that fails there is the same typed error, naming
    the file, as a read failing anywhere else."""
    import io

    from holotrace.errors import TraceReadError

    whole = gzip.compress(b'{"traceEvents": []}', mtime=0)

    class Failing(io.BytesIO):
        def read(self, n=-1):
            if self.tell() >= len(whole):
                raise OSError(5, "Input/output error")
            return super().read(n)

    path = tmp_path / "padded.json.gz"
    monkeypatch.setattr(_read, "INFLATE", zlib)  # (the careful reader: the one that reads the padding itself)
    monkeypatch.setattr(_read, "open_stream", lambda p: (Failing(whole + bytes(64)), True))
    with pytest.raises(TraceReadError, match="read failed: Input/output error") as e:
        list(_read.raw_bytes(path, 1 << 14, lambda code, detail: None))
    assert str(path) in str(e.value)
