"""The cache serves an entry only when it is intact and still describes its file; a bad entry is a miss
that is rewritten; concurrent loaders and clearers of one cache folder all get the same tables."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path

import pytest
from _reliability import doc, kernel

import holotrace
from holotrace.ingest import cache

COLS = ("ts_ns", "dur_ns", "name", "kind")


def _job(env, n_ranks: int = 2) -> Path:
    for r in range(n_ranks):
        env.write(
            f"job/rank-{r}.json",
            doc([kernel(f"k{r}", ts=10 * i + r, dur=3 + r) for i in range(200)], rank=r, world=n_ranks),
        )
    return env.work / "job"


def _tables(job) -> dict:
    return {
        r: {c: job.rank(r).columns[c].tolist() for c in COLS}
        | {"names": job.strings.decode(job.rank(r).columns["name"]).tolist()}
        for r in job.ranks
    }


def _entries(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_dir())


def _load(path, cdir):
    job = holotrace.load(path, cache_dir=cdir)
    cache.flush()
    return job


@pytest.fixture
def primed(env):
    job = _job(env)
    env.freeze()
    fresh = _tables(holotrace.load(job, cache=False))
    _load(job, env.cache)
    assert len(_entries(env.cache)) == 2
    return env, job, fresh


def _hit(path, cdir) -> bool:
    from holotrace.loader import CACHE_TAG

    return cache.load(path, cdir, False, CACHE_TAG) is not None


@pytest.mark.parametrize(
    "damage",
    [
        "info_empty",
        "info_missing",
        "events_deleted",
        "events_truncated",
        "events_flipped",
        "info_not_json",
        "problems_wrong_type",
    ],
)
def test_damaged_entry_is_a_miss_then_rewritten(primed, damage):
    env, job, fresh = primed
    entry = _entries(env.cache)[0]
    info = entry / "info.json"
    ev = entry / cache.COLUMNS
    if damage == "info_empty":
        info.write_text("{}")
    elif damage == "info_missing":
        info.unlink()
    elif damage == "events_deleted":
        ev.unlink()
    elif damage == "events_truncated":
        ev.write_bytes(ev.read_bytes()[:-100])
    elif damage == "events_flipped":
        b = bytearray(ev.read_bytes())
        b[len(b) // 2] ^= 0x40
        ev.write_bytes(bytes(b))
    elif damage == "info_not_json":
        info.write_bytes(b"\xff{")
    else:
        d = json.loads(info.read_text())
        d["problems"] = "x"
        info.write_text(json.dumps(d))
    for _ in range(2):  # the first load rewrites the entry, the second reads it
        assert _tables(_load(job, env.cache)) == fresh
    assert all(_hit(p, env.cache) for p in sorted(job.iterdir()))
    env.check_untouched()


def test_swapped_events_files_are_not_served(primed):
    env, job, fresh = primed
    a, b = _entries(env.cache)
    ta, tb = (a / cache.COLUMNS).read_bytes(), (b / cache.COLUMNS).read_bytes()
    (a / cache.COLUMNS).write_bytes(tb)
    (b / cache.COLUMNS).write_bytes(ta)
    assert not any(_hit(p, env.cache) for p in sorted(job.iterdir()))
    assert _tables(_load(job, env.cache)) == fresh


@pytest.mark.parametrize("how", ["same_size_and_mtime", "truncated_padded"])
def test_rewritten_trace_is_not_served_stale(primed, how):
    env, job, fresh = primed
    f = job / "rank-1.json"
    st = f.stat()
    text = f.read_bytes()
    if how == "same_size_and_mtime":
        new = text.replace(b'"dur": 4', b'"dur": 9')  # same length, other numbers
    else:
        cut = text[: text.rindex(b'{"ph"')]  # the last event cut off, padded to the old size
        new = cut + b" " * (len(text) - len(cut))
    assert len(new) == len(text) and new != text
    f.write_bytes(new)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    assert not _hit(f, env.cache)
    got = _load(job, env.cache)
    want = holotrace.load(job, cache=False)
    assert _tables(got) == _tables(want) != fresh
    assert {x.code.value for x in got.findings} == {x.code.value for x in want.findings}


def test_entries_are_written_atomically_and_marked(primed):
    env, job, _ = primed
    for e in _entries(env.cache):
        assert len(e.name) == 24 and not e.name.startswith(".")
        info = json.loads((e / "info.json").read_text())
        assert info["holotrace_cache"] == cache.CACHE_VERSION
        assert (e / cache.COLUMNS).stat().st_size == info["bytes"]
        assert info["layout"]["events"]["ts_ns"][1] == 200  # rows of the events table
    assert not [p for p in env.cache.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_clear_keeps_what_is_not_an_entry(primed):
    env, job, _ = primed
    stray = _entries(env.cache)[0] / "mine.txt"  # something foreign inside an entry-named folder
    stray.write_text("not holotrace's")
    done = cache.clear(env.cache)
    assert done[0] == 1 and done.left == 1 and stray.read_text() == "not holotrace's"
    (env.cache / "notes.txt").write_text("x")
    with pytest.raises(cache.CacheError, match="not a holotrace cache"):
        cache.clear(env.cache)
    assert (env.cache / "notes.txt").exists() and stray.exists()


# ---------------------------------------------------------------- several processes at once


def _worker(args) -> list:
    path, cdir, role, rounds = args
    out = []
    for _ in range(rounds):
        if role == "clear":
            try:
                cache.clear(Path(cdir))
            except cache.CacheError:
                out.append("refused")
        else:
            job = holotrace.load(path, cache_dir=cdir, workers=1)
            cache.flush()
            out.append(json.dumps(_tables(job), sort_keys=True))
    return out


def test_concurrent_loads_and_clears_give_the_same_tables(env):
    job = _job(env, n_ranks=3)
    env.freeze()
    want = json.dumps(_tables(holotrace.load(job, cache=False)), sort_keys=True)
    roles = ["load"] * 6 + ["clear"] * 2
    ctx = mp.get_context("fork")
    with ctx.Pool(len(roles)) as pool:
        results = pool.map(_worker, [(str(job), str(env.cache), role, 12) for role in roles])
    loads = [x for r, res in zip(roles, results) if r == "load" for x in res]
    assert len(loads) == 72 and all(x == want for x in loads)
    assert "refused" not in [x for res in results for x in res]
    # whatever the race left behind is either a valid entry or nothing: a final load reads it right
    assert json.dumps(_tables(_load(job, env.cache)), sort_keys=True) == want
    assert all(p.is_dir() and (len(p.name) == 24 or p.name.startswith((".tmp-", ".old-"))) for p in env.cache.iterdir())
    env.check_untouched()
