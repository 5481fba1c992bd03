"""A trace rewritten in place, every way a user can, is never answered from its old cache entry: the change time
and device in the fingerprint see what size, modification time and the head/tail hash do not; ``doctor
--verify`` checks entries against the whole content."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from _reliability import doc, kernel

import holotrace
from holotrace.ingest import cache
from holotrace.loader import CACHE_TAG

N = 3000  # events: the file is well over the 2 x 64 KiB the fingerprint hashes
MID = N // 2


def _content(dur_mid: int) -> str:
    evs = [kernel(f"k{i % 7}", ts=10 * i, dur=(dur_mid if i == MID else 3)) for i in range(N)]
    return json.dumps(doc(evs))


def _durations(path, cdir) -> list:
    job = holotrace.load(path, cache_dir=cdir, progress_bar=False)
    cache.flush()
    return job.rank(0).columns["dur_ns"].tolist()


def _rewrite_in_place(p, text):
    with open(p, "r+b") as fh:  # the same inode, the same size
        fh.write(text.encode())


def _truncate_extend(p, text):
    with open(p, "r+b") as fh:
        fh.truncate(0)
        fh.write(text.encode())


def _rename_over(p, text):
    tmp = p.with_name("new.json")
    tmp.write_text(text)
    os.replace(tmp, p)


def _through_hard_link(p, text):
    other = p.with_name("alias.json")
    if not other.exists():
        os.link(p, other)
    _rewrite_in_place(other, text)


def _hard_link_swapped_in(p, text):
    other = p.with_name("other.json")
    other.write_text(text)
    st = p.stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.unlink(p)
    os.link(other, p)


def _copy2_over(p, text):
    src = p.with_name("src.json")
    src.write_text(text)
    st = p.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    shutil.copy2(src, p)


WAYS = [_rewrite_in_place, _truncate_extend, _rename_over, _through_hard_link, _hard_link_swapped_in, _copy2_over]


@pytest.mark.parametrize("way", WAYS, ids=lambda f: f.__name__.strip("_"))
def test_rewritten_trace_gets_fresh_answers(env, way):
    p = env.write("job/rank-0.json", _content(5))
    if way is _through_hard_link:
        os.link(p, p.with_name("alias.json"))
    first = _durations(p, env.cache)
    assert first[MID] == 5_000 and len(_content(5)) == len(_content(7))
    st = p.stat()
    way(p, _content(7))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # `touch -r`: the old modification time back
    assert p.stat().st_size == st.st_size and p.stat().st_mtime_ns == st.st_mtime_ns
    again = _durations(p, env.cache)
    assert again[MID] == 7_000
    assert again == holotrace.load(p, cache=False).rank(0).columns["dur_ns"].tolist()
    assert _durations(p, env.cache) == again  # the rewritten entry is served next time


def test_summary_cli_after_same_size_rewrite(env):
    p = env.write("job/rank-0.json", _content(5))
    r1 = env.cli("summary", "job", "--format", "json")
    assert r1.returncode == 0, r1.stderr
    st = p.stat()
    _rewrite_in_place(p, _content(9))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    cached = env.cli("summary", "job", "--format", "json")
    fresh = env.cli("summary", "job", "--format", "json", "--no-cache")
    assert cached.returncode == fresh.returncode == 0
    drop = lambda d: {k: v for k, v in json.loads(d).items() if k != "meta"}  # noqa: E731
    assert drop(cached.stdout) == drop(fresh.stdout) != drop(r1.stdout)


def test_doctor_verify_finds_an_entry_the_fingerprint_cannot(env):
    p = env.write("job/rank-0.json", _content(5))
    _durations(p, env.cache)
    _rewrite_in_place(p, _content(7))
    entry = env.cache / cache.key_for(
        p, False, CACHE_TAG
    )  # forge the entry's fingerprint: a change below the file system
    info = json.loads((entry / "info.json").read_text())
    info["fingerprint"] = cache.fingerprint(p)
    (entry / "info.json").write_text(json.dumps(info))
    assert _durations(p, env.cache)[MID] == 5_000  # the quick check is fooled by the forgery ...
    r = env.cli("doctor", "job", "--verify")
    assert r.returncode == 0, r.stderr
    assert "whole content: 0 ok, 1 stale (removed; decoded again), 0 not cached" in r.stdout, r.stdout
    assert _durations(p, env.cache)[MID] == 7_000  # ... and the verified cache is right again
    r = env.cli("doctor", "job", "--verify")
    assert "whole content: 1 ok, 0 stale" in r.stdout, r.stdout


def test_a_column_file_rewritten_with_its_old_times_is_a_miss_and_verify_finds_a_forged_one(env):
    p = env.write("job/rank-0.json", _content(5))
    assert _durations(p, env.cache)[MID] == 5_000
    entry = env.cache / cache.key_for(p, False, CACHE_TAG)
    cols = entry / cache.COLUMNS
    layout = json.loads((entry / "info.json").read_text())["layout"]["events"]["dur_ns"]
    st = cols.stat()
    data = bytearray(cols.read_bytes())
    at = layout[0] + MID * int(layout[2][-1])  # the middle event's duration (little-endian, low byte first)
    data[at] ^= 0x01
    cols.write_bytes(bytes(data))
    os.utime(cols, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and modification time as before
    assert cache.load(p, env.cache, False, CACHE_TAG) is None  # the change time (and the load's check) saw it
    assert _durations(p, env.cache)[MID] == 5_000  # decoded again
    data = bytearray(cols.read_bytes())  # the new entry's columns damaged, and its record forged: a change below
    data[at] ^= 0x01
    cols.write_bytes(bytes(data))
    info = json.loads((entry / "info.json").read_text())  # the file system that no metadata shows
    info["columns_stat"] = cache._stat(cols)
    (entry / "info.json").write_text(json.dumps(info))
    assert _durations(p, env.cache)[MID] == 5_001  # the quick check is fooled by the forgery ...
    assert cache.verify(p, env.cache, False, CACHE_TAG) == "stale"  # ... not the whole content's
    assert _durations(p, env.cache)[MID] == 5_000
    assert cache.verify(p, env.cache, False, CACHE_TAG) == "ok"


def test_an_entry_written_before_a_reboot_has_its_columns_checked_whole(env, monkeypatch):
    p = env.write("job/rank-0.json", _content(5))
    assert _durations(p, env.cache)[MID] == 5_000
    entry = env.cache / cache.key_for(p, False, CACHE_TAG)
    cols = entry / cache.COLUMNS
    at = (lambda lay: lay[0] + MID * int(lay[2][-1]))(
        json.loads((entry / "info.json").read_text())["layout"]["events"]["dur_ns"]
    )
    data = bytearray(cols.read_bytes())
    data[at] ^= 0x01  # the columns lost in a crash, as it were: the record still matches the file's metadata
    cols.write_bytes(bytes(data))
    info = json.loads((entry / "info.json").read_text())
    assert info["boot"] == cache.boot() is not None  # written by this machine in this boot
    info["columns_stat"] = cache._stat(cols)
    (entry / "info.json").write_text(json.dumps(info))
    assert cache.load(p, env.cache, False, CACHE_TAG) is not None  # this boot: served on its metadata
    monkeypatch.setattr(cache, "boot", lambda: "another boot")
    assert cache.load(p, env.cache, False, CACHE_TAG) is None  # after a reboot: the CRC-32 finds the damage
    assert _durations(p, env.cache)[MID] == 5_000  # decoded again, and the new entry is served in this boot
    assert cache.load(p, env.cache, False, CACHE_TAG) is not None


def test_columns_packed_on_another_machine_are_checked_whole(env, monkeypatch):
    from pathlib import Path

    from holotrace import loader

    p = env.write("job/rank-0.json", _content(5))
    r = loader._load_file_or_raise(loader.LoadTask(str(p), loader.CacheSession(env.cache), 1))
    assert r.file.boot == cache.boot()  # the worker of this machine says so
    r.file.boot = "a worker's machine"
    entry = cache.commit(r.file, Path(r.work.path), env.cache, False, CACHE_TAG, r.work.fingerprint)
    assert json.loads((entry / "info.json").read_text())["boot"] is None  # its columns: CRC-32 checked on load
    crcs = []
    real = cache._crc
    monkeypatch.setattr(cache, "_crc", lambda path: crcs.append(path) or real(path))
    assert cache.load(p, env.cache, False, CACHE_TAG) is not None and crcs == [entry / cache.COLUMNS]
