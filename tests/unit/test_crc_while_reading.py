"""The CRC-32s a cache entry records (the trace's, for ``doctor --verify``, and the column file's) are taken while
the bytes pass through the decoder and the packer; they must equal the files' own, or be left unknown."""

from __future__ import annotations

import gzip
import json
import zlib

import numpy as np
import pytest

import holotrace
from holotrace.ingest import cache as cache_mod
from holotrace.ingest.decode import decode_file
from holotrace.ingest.store import Spill
from tracebuilder import TraceBuilder


def _trace(tmp_path, name="t.json", n=600, tricky=False, compact=False):
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 100_000)
    for i in range(n):
        name_ = 'x"},{"ph":"X",' + "y" * (i % 13) if tricky else f"aten::op{i % 7}"
        tb.cpu_op(name_, i * 30, 20, input_dims=[[8, 16], [16, 4]])
        tb.launch_kernel(f"gemm_{i % 5}", i * 30 + 1, 3, i * 30 + 5, 10.5)
    return tb.write(tmp_path / name, compact=compact)


def _crc_of(path) -> int:
    with open(path, "rb") as fh:
        return zlib.crc32(fh.read())


@pytest.mark.parametrize("tricky,compact", [(False, False), (False, True), (True, True)])
@pytest.mark.parametrize("chunk,workers", [(1 << 30, 1), (97, 1), (997, 2), (4096, 3)])
def test_plain_file_crc_taken_while_scanning(tmp_path, tricky, compact, chunk, workers):
    f = _trace(tmp_path, tricky=tricky, compact=compact)
    d = decode_file(f, chunk_bytes=chunk, workers=workers)
    assert d.content_crc32 == _crc_of(f)


def test_crc_of_a_file_with_a_byte_order_mark(tmp_path):
    f = _trace(tmp_path)
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
    for chunk in (1 << 30, 500):
        assert decode_file(f, chunk_bytes=chunk).content_crc32 == _crc_of(f)


def test_gzip_crc_is_the_compressed_file(tmp_path):
    f = _trace(tmp_path)
    data = f.read_bytes()
    one = tmp_path / "one.json.gz"
    one.write_bytes(gzip.compress(data, compresslevel=1))
    two = tmp_path / "two.json.gz"  # two gzip members
    two.write_bytes(gzip.compress(data[:5000]) + gzip.compress(data[5000:]))
    for g in (one, two):
        for chunk in (1 << 30, 700):
            assert decode_file(g, chunk_bytes=chunk).content_crc32 == _crc_of(g)


@pytest.mark.parametrize("gz", [False, True])
def test_damaged_files_give_their_crc_or_none(tmp_path, gz):
    """A file whose reading stops early (damage in the event list, a cut gzip stream) never records a wrong CRC."""
    f = _trace(tmp_path)
    data = f.read_bytes()
    bad = data[: len(data) // 3] + b"@@@" + data[len(data) // 3 :]
    p = tmp_path / ("bad.json.gz" if gz else "bad.json")
    p.write_bytes(gzip.compress(bad)[:-4000] if gz else bad)
    for chunk in (1 << 30, 900):
        d = decode_file(p, chunk_bytes=chunk)
        assert d.content_crc32 in (None, _crc_of(p))


@pytest.mark.parametrize("memory", [None, 0])
def test_pack_crc_equals_the_packed_file(tmp_path, memory):
    with Spill(tmp_path, memory=memory) as s:
        s.append("events", {"a": np.arange(1000, dtype=np.int64), "b": np.arange(1000, dtype=np.int8)})
        s.append("events", {"a": np.arange(7, dtype=np.int16), "b": np.arange(7, dtype=np.int32)})
        s.append("names", {"c": np.array([3, 1, 2], dtype=np.int32)})
        s.pack(tmp_path / "packed", {"events": ["b", "a"]}, b"0123456789abcdef")
        if memory == 0:  # columns in files: copied inside the kernel, the CRC is not known
            assert s.packed_crc32 is None
        else:
            assert s.packed_crc32 == _crc_of(tmp_path / "packed")


@pytest.mark.parametrize("gz", [False, True])
def test_cache_entry_records_the_files_crcs(tmp_path, gz):
    (tmp_path / "job").mkdir()
    f = _trace(tmp_path / "job")
    if gz:
        g = f.with_name("t.json.gz")
        g.write_bytes(gzip.compress(f.read_bytes()))
        f.unlink()
        f = g
    cache = tmp_path / "cache"
    holotrace.load(f, cache_dir=cache)
    cache_mod.flush()
    (info_path,) = cache.glob("*/info.json")
    info = json.loads(info_path.read_text())
    assert info["content_crc32"] == _crc_of(f)
    assert info["crc32"] == _crc_of(info_path.parent / cache_mod.COLUMNS)
    assert cache_mod.verify(f, cache, tag=holotrace.loader.CACHE_TAG) == "ok"


def test_no_crc_without_a_cache(tmp_path):
    """A load without a cache writes no entry: the decoder does not take the CRC (``checksum=False``)."""
    from holotrace.ingest.decode import decode_into

    f = _trace(tmp_path)
    with Spill(tmp_path) as s:
        assert decode_into(f, s, checksum=False).content_crc32 is None
    with Spill(tmp_path) as s:
        assert decode_into(f, s).content_crc32 == _crc_of(f)
