"""Which string ids each id column holds: known when a file is decoded, kept in its cache entry, and used by the
loader to renumber only the columns holding an id that the job's string table numbers otherwise."""

from __future__ import annotations

import json

import numpy as np
import pytest

import holotrace
from holotrace import loader
from holotrace.ingest import cache, ids_used, renumber
from holotrace.ingest.decode import decode_file
from holotrace.schema import ID_COLUMNS
from tracebuilder import TraceBuilder

TABLES = ("events", "instants", "counters", "flows", "names")


def _job(tmp_path):
    """Three ranks: each launches a kernel of its own name before the shared ones, so rank 1's and 2's kernel
    names (and thread names) are numbered otherwise in their files than in the job."""
    folder = tmp_path / "job"
    for r in range(3):
        tb = TraceBuilder(rank=r, world_size=3)
        tb.annotation("ProfilerStep#1", 0, 200)
        tb.launch_kernel(f"own_{r}", cpu_ts_us=5, cpu_dur_us=2, gpu_ts_us=10, gpu_dur_us=5)
        for i in range(4):
            tb.launch_kernel("gemm", cpu_ts_us=20 + 20 * i, cpu_dur_us=5, gpu_ts_us=30 + 20 * i, gpu_dur_us=10)
        tb.raw({"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": f"main of rank {r}"}})
        tb.write(folder, name=f"rank-{r}.json")
    return folder


def _as_text(job) -> dict:
    """Every id column of every rank, as strings (what renumbering must keep)."""
    out = {}
    for r in job.ranks:
        t = job.rank(r)
        tables = {"events": t.columns} | {k: t._side[k] for k in TABLES[1:]}
        for name, cols in tables.items():
            for c in ID_COLUMNS[name]:
                if c in cols:
                    out[(r, name, c)] = job.strings.decode(cols[c]).tolist()
    return out


def test_masks_hold_exactly_the_ids_of_each_column(tmp_path):
    for f in sorted(_job(tmp_path).iterdir()):
        d = decode_file(f)
        assert d.ids_used is not None
        for t in TABLES:
            for c in ID_COLUMNS[t]:
                col = getattr(d, t).get(c)
                if col is None or not len(col):
                    continue
                want = np.zeros(len(d.strings), dtype=bool)
                want[np.asarray(col)[np.asarray(col) >= 0]] = True
                assert np.array_equal(d.ids_used[t][c], want), (f.name, t, c)


def test_only_columns_holding_a_moved_id_are_renumbered(tmp_path):
    files = sorted(_job(tmp_path).iterdir())
    from holotrace.model.strings import StringTable

    strings = StringTable()
    strings.merge(decode_file(files[0]).strings)
    d = decode_file(files[1])
    moved = strings.merge(d.strings) != np.arange(len(d.strings))
    tables = {t: getattr(d, t) for t in ID_COLUMNS}
    todo = loader._holding_moved(tables, moved, d.ids_used)
    assert "name" in todo["events"]  # "own_1" comes before "gemm" in rank 1's file, after it in the job
    assert "cat" not in todo.get("events", [])  # categories are numbered alike in every file
    assert loader._holding_moved(tables, moved, None)["events"] == [  # without masks: every column holding an id
        c for c in ID_COLUMNS["events"] if c in d.events and int(d.events[c].max(initial=-1)) >= 0
    ]


@pytest.mark.parametrize("in_memory_rows", [renumber._IN_MEMORY_ROWS, 0])
def test_the_same_strings_uncached_cold_cached_and_without_masks(tmp_path, monkeypatch, in_memory_rows):
    monkeypatch.setattr(renumber, "_IN_MEMORY_ROWS", in_memory_rows)  # 0: every renumbered column goes to a file
    folder = _job(tmp_path)
    want = _as_text(holotrace.load(folder, cache=False))
    names = [s for s in want[(1, "events", "name")] if s.startswith(("own", "gemm"))]
    assert names == ["own_1"] + ["gemm"] * 4  # the kernels (their launches are runtime calls)
    assert "main of rank 2" in want[(2, "names", "m_name")]
    cdir = tmp_path / "cache"
    for _ in range(2):  # the first load writes the entries, the second maps them
        assert _as_text(holotrace.load(folder, cache_dir=cdir)) == want
        cache.flush()
    monkeypatch.setattr(loader, "_holding_moved", lambda tables, moved, used: _every(tables))
    assert _as_text(holotrace.load(folder, cache=False)) == want


def _every(tables):
    return {t: [c for c in ID_COLUMNS[t] if c in tables[t]] for t in ID_COLUMNS}


def test_masks_round_trip_and_a_damaged_one_is_a_miss(tmp_path):
    folder = _job(tmp_path)
    cdir = tmp_path / "cache"
    holotrace.load(folder, cache_dir=cdir)
    cache.flush()
    f = sorted(folder.iterdir())[1]
    d = decode_file(f)
    back = ids_used.decode(ids_used.encode(d.ids_used), len(d.strings))
    assert {(t, c): m.tolist() for t, cols in back.items() for c, m in cols.items()} == {
        (t, c): m.tolist() for t, cols in d.ids_used.items() for c, m in cols.items()
    }
    entry = cdir / cache.key_for(f, tag=loader.CACHE_TAG)
    info = json.loads((entry / "info.json").read_text())
    info["ids_used"]["events"]["name"] = info["ids_used"]["events"]["name"][:-4]  # a mask too short
    (entry / "info.json").write_text(json.dumps(info))
    assert cache.load(f, cdir, False, loader.CACHE_TAG) is None
    assert _as_text(holotrace.load(folder, cache_dir=cdir)) == _as_text(holotrace.load(folder, cache=False))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_compiled_renumbering_is_the_gather_and_marks(dtype):
    from holotrace.schema import compact_ints

    rng = np.random.default_rng(7)
    for k, spread in ((5, 100), (90, 40_000), (90, 3_000_000)):  # file ids that fit int8/int16, int16/int32, int32
        local = rng.integers(-1, k, 500).astype(dtype)
        rmx = np.append(rng.choice(spread, size=k, replace=False).astype(np.int32), np.int32(-1))
        want_ids = compact_ints(rmx[local])
        want = ids_used.IdsUsed()
        want.mark("events", "name", rmx[local], int(rmx.max()) + 1)
        got = ids_used.IdsUsed()
        ids = got.renumber("events", "name", local, rmx, int(rmx.max()) + 1)
        assert ids.dtype == want_ids.dtype and np.array_equal(ids, want_ids)
        n = int(rmx.max()) + 2
        for t, cols in want.masks(n).items():
            for c, m in cols.items():
                assert np.array_equal(got.masks(n)[t][c], m)
    empty = ids_used.IdsUsed().renumber("events", "name", np.zeros(0, dtype=dtype), rmx, 10)
    assert len(empty) == 0


def test_compiled_renumbering_refuses_ids_outside_the_remap():
    from holotrace.ingest import _scan

    rmx = np.array([3, 1, -1], dtype=np.int32)
    out = np.empty(2, dtype=np.int32)
    mask = np.zeros(5, dtype=np.uint8)
    with pytest.raises(ValueError, match="outside"):
        _scan.renumber(np.array([0, 2], dtype=np.int16), rmx, out, mask)  # 2 is the remap's -1 slot, not an id
    with pytest.raises(ValueError, match="outside"):
        _scan.renumber(np.array([0], dtype=np.int16), rmx, out[:1], np.zeros(3, dtype=np.uint8))  # id 3: no slot
    mask = np.zeros(5, dtype=np.uint8)  # (a refused call may have marked some ids already)
    assert _scan.renumber(np.array([1, -1], dtype=np.int8), rmx, out, mask) == (-1, 1)
    assert out.tolist() == [1, -1] and mask.tolist() == [0, 1, 0, 0, 1]
