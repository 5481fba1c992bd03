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
