"""Columns in files: the spill a decode appends to, the packed file a rank maps, and what a load leaves behind."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import holotrace
from corpus import golden_jobs
from holotrace.errors import TraceReadError
from holotrace.ingest import store
from holotrace.ingest.store import Spill, open_packed
from holotrace.model import derive as derive_mod
from holotrace.model import validate as validate_mod
from holotrace.model.derive import DERIVED, derive_columns
from tracebuilder import TraceBuilder


@pytest.mark.parametrize("memory", [None, 0, 10])  # held in memory, in files from the start, moved to files midway
def test_spill_widens_to_what_concatenating_gives_and_reads_across_pieces(tmp_path, memory):
    pieces = [
        np.array([1, -2, 3], dtype=np.int8),
        np.array([], dtype=np.int64),
        np.array([300, 4], dtype=np.int16),
        np.array([5], dtype=np.int8),
        np.array([2**40], dtype=np.int64),
    ]
    want = np.concatenate([p for p in pieces if len(p)])
    with Spill(tmp_path, memory=memory) as spill:
        for p in pieces:
            buffer = np.concatenate([p, p])  # the piece is a view of a larger buffer, reused once appended
            spill.append("events", {"x": buffer[: len(p)], "flag": np.ones(len(p), dtype=bool)})
            buffer[:] = 0
        assert spill.in_memory == (memory is None)
        assert spill.in_memory or len(list(spill.folder.iterdir())) == 2  # one file per column
        assert spill.rows("events") == len(want)
        assert spill.read("events", "x").dtype == np.int64
        np.testing.assert_array_equal(spill.read("events", "x"), want)
        np.testing.assert_array_equal(spill.read("events", "x", 2, 5), want[2:5])  # rows from three pieces
        token = os.urandom(16)
        layout = spill.pack(tmp_path / "packed", {"events": ["flag", "x"]}, token)
        folder = spill.folder
    assert not folder.exists()  # the spill's own files went
    got = open_packed(tmp_path / "packed", layout, token)["events"]
    assert list(got) == ["flag", "x"]
    np.testing.assert_array_equal(got["x"], want)
    assert got["flag"].dtype == bool and got["flag"].all()
    assert not got["x"].flags.writeable  # mapped read-only: the model never writes
    assert all(layout["events"][k][0] % 64 == 0 for k in ("flag", "x"))
    with pytest.raises(ValueError):
        open_packed(tmp_path / "packed", layout, os.urandom(16))  # another entry's token
    with pytest.raises(ValueError):
        open_packed(tmp_path / "packed", {"events": {"x": [64, 10**9, "<i8"]}})  # beyond the file


def test_a_spill_holds_the_columns_of_a_file_in_memory_only_when_they_fit(tmp_path):
    def spill_memory(name: str, size: int, head: bytes = b"{") -> int:
        p = tmp_path / name
        p.write_bytes(head)
        os.truncate(p, size)  # sparse: no disk taken
        return store.spill_memory(str(p))

    fits = int(store.SPILL_MEMORY / 0.35)  # the largest JSON whose columns fit
    assert spill_memory("small.json", 1000) == spill_memory("limit.json", fits) == store.SPILL_MEMORY
    assert spill_memory("big.json", fits + 1) == 0
    assert spill_memory("small.json.gz", fits // 12, b"\x1f\x8b") == store.SPILL_MEMORY
    assert spill_memory("big.json.gz", fits // 12 + 1, b"\x1f\x8b") == 0  # taken as 12 times its size
    assert store.spill_memory(str(tmp_path / "gone.json")) == 0


def test_spill_keeps_an_all_empty_column_of_its_first_type(tmp_path):
    with Spill(tmp_path) as spill:
        spill.append("events", {"x": np.empty(0, dtype=np.int32)})
        layout = spill.pack(tmp_path / "p", {}, b"t" * 16)
    got = open_packed(tmp_path / "p", layout)["events"]["x"]
    assert got.dtype == np.int32 and len(got) == 0


def _builder() -> TraceBuilder:
    """Steps, launches with kernels on two streams (one out of start order, overlapping), a graph launch,
    a kernel without its launch and a launch without its kernel."""
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#4", 0, 100)
    tb.annotation("ProfilerStep#5", 100, 100)
    for i in range(30):
        tb.launch_kernel(
            f"k{i % 4}",
            cpu_ts_us=2 + 6 * i,
            cpu_dur_us=2,
            gpu_ts_us=300 - 8 * i if i % 3 == 0 else 10 + 6 * i,
            gpu_dur_us=9 if i % 5 == 0 else 3,
            stream=7 + (i % 3 == 0),
        )
    tb.gpu("orphan_kernel", 50, 2, stream=9, correlation=99999)
    tb.runtime("cudaLaunchKernel", 150, 1, correlation=88888)
    return tb


def _brute_force_overlaps(c):
    gpu = np.isin(c["kind"], [10, 11, 12]) & (c["stream"] >= 0)
    g = np.flatnonzero(gpu)
    order = np.lexsort((c["ts_ns"][g], c["stream"][g], c["pid"][g]))
    r = g[order]
    same = (c["stream"][r][1:] == c["stream"][r][:-1]) & (c["pid"][r][1:] == c["pid"][r][:-1])
    ov = same & (c["ts_ns"][r][1:] < c["end_ns"][r][:-1])
    return int(ov.sum()), (int(r[int(np.argmax(ov)) + 1]) if ov.any() else -1)


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 18])
def test_chunked_derivation_and_validation_match_the_whole_rank_at_once(tmp_path, monkeypatch, chunk):
    path = _builder().write(tmp_path / "t.json")
    whole = holotrace.load(path, cache=False)
    monkeypatch.setattr(derive_mod, "CHUNK_ROWS", chunk)
    monkeypatch.setattr(validate_mod, "CHUNK_ROWS", chunk)
    chunked = holotrace.load(path, cache=False)
    a, b = whole.rank(0).columns, chunked.rank(0).columns
    for k in DERIVED:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert [(f.code, f.count, f.example) for f in whole.findings] == [
        (f.code, f.count, f.example) for f in chunked.findings
    ]
    # the links and steps by hand: every kernel but the orphan has its launch, the lone launch has none
    kind, partner = a["kind"], a["partner"]
    names = whole.strings.decode(a["name"])
    assert (partner[kind == 10] >= 0).sum() == 30 and partner[names == "orphan_kernel"][0] == -1
    assert partner[(kind == 3) & (a["correlation"] == 88888)][0] == -1
    assert sorted(set(a["iteration"][kind == 10].tolist())) == [-1, 4, 5]
    # overlaps: the out-of-order stream is checked sorted, as a brute force over the whole rank
    ov = next(f for f in chunked.findings if f.code.value == "overlapping_kernels")
    n_ov, first = _brute_force_overlaps(a)
    assert ov.count == n_ov > 0 and f"event #{int(a['index'][first])} " in ov.example


@pytest.mark.parametrize(
    "job", [j[1] for j in golden_jobs(include_shared=False, include_reordered=False)], ids=lambda p: p.name
)
def test_bundled_ranks_derive_the_same_in_small_chunks(job, monkeypatch):
    loaded = holotrace.load(job, cache=False)
    monkeypatch.setattr(derive_mod, "CHUNK_ROWS", 997)
    for r in loaded.ranks:
        c = loaded.rank(r).columns
        small = derive_columns(
            {k: c[k] for k in ("cat", "name", "ts_ns", "dur_ns", "correlation")}, loaded.strings.table
        )
        for k in DERIVED:
            np.testing.assert_array_equal(small[k], c[k], err_msg=f"rank {r} {k}")


def test_a_load_leaves_no_temporary_files_and_maps_its_columns(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(store, "SPILL_MEMORY", 0)  # (a file this small is otherwise used from memory, not mapped)
    job = holotrace.load(_builder().write(tmp_path / "t.json"), cache=False)
    assert list(tmp.iterdir()) == []
    t = job.rank(0)
    assert not t.columns["ts_ns"].flags.writeable and t.n_events > 60
    before = t.columns["ts_ns"].copy()
    t.release_pages()  # pages given back are read again from the file
    np.testing.assert_array_equal(t.columns["ts_ns"], before)


def test_no_room_for_the_columns_is_a_typed_error(tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "_write_all", full)  # the spill's files, and a packed file, cannot be written
    monkeypatch.setattr(store, "SPILL_MEMORY", 0)  # (the columns go to files from the first piece)
    path = _builder().write(tmp_path / "t.json")
    with pytest.raises(TraceReadError) as e:
        holotrace.load(path, cache=False)
    assert "cannot write the decoded columns" in str(e.value) and "TMPDIR" in str(e.value) and str(path) in str(e.value)
    assert Path(path).exists()


def test_an_unusable_temporary_folder_is_a_typed_error(tmp_path, monkeypatch):
    import tempfile

    path = _builder().write(tmp_path / "t.json")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))  # as if TMPDIR named a folder that went
    assert holotrace.load(path, cache=False).rank(0).n_events > 60  # one small file: decoded in memory, no folder used
    monkeypatch.setattr(store, "SPILL_MEMORY", 0)  # columns that go through files need the folder
    with pytest.raises(TraceReadError) as e:
        holotrace.load(path, cache=False)
    assert "no-such-folder" in str(e.value) and "TMPDIR" in str(e.value) and str(path) in str(e.value)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open descriptors through /proc (Linux)")
def test_mapped_ranks_hold_no_file_descriptors(tmp_path):
    for r in range(6):
        tb = _builder()
        tb.rank, tb.world_size = r, 6
        tb.write(tmp_path / "job")
    before = len(list(Path("/proc/self/fd").iterdir()))
    job = holotrace.load(tmp_path / "job", cache=False, workers=1)
    assert job.ranks == list(range(6))
    assert len(list(Path("/proc/self/fd").iterdir())) <= before  # thousands of ranks must not run out of them
    assert int(job.rank(5).columns["ts_ns"].min()) >= 0


def test_a_failed_load_leaves_no_decoded_files(tmp_path, monkeypatch):
    import tempfile

    from holotrace.loader import one_file

    for r in range(3):
        tb = _builder()
        tb.rank, tb.world_size = r, 3
        tb.write(tmp_path / "job")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    calls = []

    def failing(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("interrupted")
        return open_packed(*a, **k)

    monkeypatch.setattr(one_file, "open_packed", failing)
    with pytest.raises(RuntimeError):
        holotrace.load(tmp_path / "job", cache=False, workers=1)
    assert list(tmp.iterdir()) == []  # the third rank's decoded columns were removed, not left behind


def _entry(cache: Path, path: Path) -> tuple[bytes, dict]:
    import json

    from holotrace.ingest import cache as cache_mod

    entry = cache / cache_mod.key_for(path, tag=holotrace.loader.CACHE_TAG)
    info = json.loads((entry / "info.json").read_text())
    return (entry / "columns.bin").read_bytes()[store.HEADER :], info


@pytest.mark.parametrize("in_files", [False, True], ids=["joined-in-memory", "files-mapped"])
def test_one_file_decoded_here_is_used_as_it_is_and_cached_as_a_pool_load_would(tmp_path, monkeypatch, in_files):
    from holotrace.ingest import cache as cache_mod

    if in_files:
        monkeypatch.setattr(store, "SPILL_MEMORY", 0)  # the columns in files from the first piece
    for r in range(2):
        tb = _builder()
        tb.rank, tb.world_size = r, 2
        path = tb.write(tmp_path / "job")
    first = tmp_path / "job" / "rank-0.pt.trace.json"
    pool = holotrace.load(tmp_path / "job", cache_dir=tmp_path / "pool", workers=1)  # each file packed, then mapped
    one = holotrace.load(first, cache_dir=tmp_path / "one")  # one file: its columns as they are, packed on a thread
    cache_mod.flush()
    a, b = pool.rank(0).columns, one.rank(0).columns  # (the first file's string ids are the job's)
    assert list(a) == list(b) and path != first
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        assert not b[k].flags.writeable, k  # read-only, as mapped columns are
    assert [f.code for f in pool.findings if f.rank == 0] == [f.code for f in one.findings if f.rank == 0]
    cols_a, info_a = _entry(tmp_path / "pool", first)
    cols_b, info_b = _entry(tmp_path / "one", first)
    assert cols_a == cols_b  # the same packed columns after the header (whose token differs)
    differ = {k for k in info_a if info_a[k] != info_b.get(k)}
    assert differ <= {"token", "crc32", "columns_stat"} and set(info_a) == set(info_b)
    assert cache_mod.verify(first, tmp_path / "one", tag=holotrace.loader.CACHE_TAG) == "ok"  # its CRC-32 is right
    again = holotrace.load(first, cache_dir=tmp_path / "one")  # a cache hit: mapped from the entry the thread wrote
    np.testing.assert_array_equal(again.rank(0).columns["ts_ns"], b["ts_ns"])


def test_a_column_in_a_file_is_held_in_its_widest_type_as_pieces_come():
    pieces = [
        np.array([], dtype=np.int64),  # (an empty piece does not widen the column)
        np.array([1, -2], dtype=np.int8),
        np.array([300, 7], dtype=np.int16),
        np.array([5], dtype=np.int8),
        np.array([], dtype=np.int64),
        np.array([70_000], dtype=np.int32),
        np.array([-1, 2], dtype=np.int16),
    ]
    want = np.concatenate([p for p in pieces if len(p)])
    packed = {}
    for memory in (None, 0):  # held in memory (joined when packed), and in a file from the first piece
        with Spill(memory=memory) as sp:
            for p in pieces:
                sp.append("t", {"c": p})
            if memory == 0:
                got = sp.mapped({})["t"]["c"]
                assert got.dtype == want.dtype == np.int32 and not got.flags.writeable
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(sp.read("t", "c", 2, 5), want[2:5])
            layout = sp.pack(Path(sp.folder) / "packed", {}, b"t" * 16)
            packed[memory] = (layout, (Path(sp.folder) / "packed").read_bytes())
            col = open_packed(Path(sp.folder) / "packed", layout)["t"]["c"]
            np.testing.assert_array_equal(col, want)
    assert packed[None] == packed[0]  # the same packed file either way
    with Spill(memory=0) as sp:  # a column of empty pieces only: the first piece's type
        sp.append("t", {"c": np.array([], dtype=np.int16), "d": np.array([1])})  # (d's bytes: to files)
        sp.append("t", {"c": np.array([], dtype=np.int64), "d": np.array([2])})
        assert not sp.in_memory
        assert sp.mapped({})["t"]["c"].dtype == np.int16


def test_one_file_without_a_cache_writes_no_packed_file(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    packed = []
    real = Spill.pack
    monkeypatch.setattr(Spill, "pack", lambda self, *a: packed.append(a) or real(self, *a))
    job = holotrace.load(_builder().write(tmp_path / "t.json"), cache=False)
    assert packed == [] and list(tmp.iterdir()) == [] and job.rank(0).n_events > 60
