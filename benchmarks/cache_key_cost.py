#!/usr/bin/env python3
"""What a cache key costs on one big trace: the fingerprint holotrace keys entries by, full-content hashes, and
the cached reload of the file (``holotrace.load`` served by the cache).

    python benchmarks/cache_key_cost.py FILE [--repeat 5]

CPU seconds (process time) and wall seconds, best of ``--repeat``, with the file in the page cache (a first
read from disk is bounded by the disk instead). xxh3/blake3 are measured when ``xxhash``/``blake3`` are
installed; the standard library's zlib.crc32 and hashlib.blake2b/sha1 always.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
import zlib


def _chunks(path, size=8 << 20):
    buf = bytearray(size)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while True:
            k = fh.readinto(buf)
            if not k:
                return
            yield view[:k]


def hashers() -> dict:
    out = {
        "zlib.crc32": lambda p: _fold(p, zlib.crc32),
        "hashlib.blake2b": lambda p: _update(p, hashlib.blake2b(digest_size=16)),
        "hashlib.sha1": lambda p: _update(p, hashlib.sha1()),
    }
    try:
        import xxhash

        out["xxhash.xxh3_64"] = lambda p: _update(p, xxhash.xxh3_64())
        out["xxhash.xxh3_128"] = lambda p: _update(p, xxhash.xxh3_128())
    except ImportError:
        pass
    try:
        import blake3

        out["blake3"] = lambda p: _update(p, blake3.blake3())
        out["blake3 (threads)"] = lambda p: _update(p, blake3.blake3(max_threads=blake3.blake3.AUTO))
    except ImportError:
        pass
    return out


def _fold(path, fn):
    v = 0
    for c in _chunks(path):
        v = fn(c, v)
    return v


def _update(path, h):
    for c in _chunks(path):
        h.update(c)
    return h.hexdigest()


def timed(fn, repeat: int) -> tuple:
    best_cpu = best_wall = float("inf")
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        best_cpu, best_wall = min(best_cpu, time.process_time() - c0), min(best_wall, time.perf_counter() - w0)
    return round(best_cpu, 4), round(best_wall, 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    import holotrace
    from holotrace.ingest import cache

    size = os.path.getsize(a.file)
    _update(a.file, hashlib.sha1())  # into the page cache
    rows = {
        "fingerprint (device, inode, size, mtime, ctime, 128 KiB head+tail)": timed(
            lambda: cache.fingerprint(a.file), a.repeat
        )
    }
    for name, fn in hashers().items():
        rows[f"full hash: {name}"] = timed(lambda fn=fn: fn(a.file), a.repeat)
    with tempfile.TemporaryDirectory() as cdir:
        holotrace.load(a.file, cache_dir=cdir, progress_bar=False)
        cache.flush()
        rows["cached reload (holotrace.load, cache hit)"] = timed(
            lambda: holotrace.load(a.file, cache_dir=cdir, progress_bar=False), a.repeat
        )
    print(
        json.dumps(
            {
                "file": a.file,
                "bytes": size,
                "loadavg": open("/proc/loadavg").read().split()[:3],
                "seconds (cpu, wall), best of": a.repeat,
                "rows": {k: {"cpu_s": c, "wall_s": w, "GB/s": round(size / w / 1e9, 2)} for k, (c, w) in rows.items()},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
