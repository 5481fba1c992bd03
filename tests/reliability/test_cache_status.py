"""One cache entry per trace file whatever the command asked for (raw args kept in it, compressed), and
``holotrace cache`` with no action shows where the cache is, its entries and their size."""

from __future__ import annotations

import gzip
import json

from _reliability import doc, kernel

import holotrace
from holotrace.ingest import cache


def _job(env):
    for r in range(2):
        env.write(
            f"job/rank-{r}.json",
            doc(
                [
                    kernel(f"k{r}", ts=10 * i, dur=3, args={"stream": 7, "correlation": i, "note": "x" * 40})
                    for i in range(300)
                ],
                rank=r,
                world=2,
            ),
        )
    return env.work / "job"


def _entries(env):
    return sorted(p for p in env.cache.iterdir() if p.is_dir())


def test_one_entry_per_trace_whatever_the_command(env):
    job = _job(env)
    plain = holotrace.load(job, cache_dir=env.cache)
    cache.flush()
    assert len(_entries(env)) == 2
    full = holotrace.load(job, cache_dir=env.cache, all_args=True)  # asks for raw args: the entries are replaced
    cache.flush()
    assert len(_entries(env)) == 2 and all((e / cache.RAW_ARGS).is_file() for e in _entries(env))
    texts = full.rank(0).raw_args
    assert len(texts) == 300 and json.loads(texts[5])["note"] == "x" * 40
    e = next(e for e in _entries(env) if json.loads((e / "info.json").read_text())["source"].endswith("rank-0.json"))
    stored = (e / cache.RAW_ARGS).read_bytes()
    assert json.loads(gzip.decompress(stored)) == texts and len(stored) < len(json.dumps(texts)) / 5
    again = holotrace.load(job, cache_dir=env.cache, all_args=True)  # served, raw args and all
    plain2 = holotrace.load(job, cache_dir=env.cache)
    cache.flush()
    assert again.rank(0).raw_args == texts and len(_entries(env)) == 2
    assert plain2.rank(1).columns["dur_ns"].tolist() == plain.rank(1).columns["dur_ns"].tolist()


def test_cache_status(env):
    r = env.cli("cache")
    assert r.returncode == 0 and "not created yet" in r.stdout and str(env.cache) in r.stdout
    job = _job(env)
    assert env.cli("info", str(job)).returncode == 0
    r = env.cli("cache")
    size = sum(f.stat().st_size for e in _entries(env) for f in e.iterdir())
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"cache folder {env.cache}"
    assert f"2 cached trace(s), {size / 1e6:.1f} MB" in r.stdout
    assert env.cli("cache", "clear").returncode == 0
    assert "0 cached trace(s), 0.0 MB" in env.cli("cache").stdout
