"""On-disk cache of decoded files: each entry is the packed column file a load maps.

One entry (a folder) per trace file under the user's cache dir (``$HOLOTRACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/
holotrace``, else ``~/.cache/holotrace``), named by the file's absolute path, the decoder's format and the caller's
tag. Nothing is ever written next to the traces unless the caller passes that folder as ``cache_dir``.

An entry holds ``columns.bin`` (every table's columns, uncompressed, at aligned offsets: see
:mod:`holotrace.ingest.store`), ``info.json`` (the layout, the file's metadata and string table) and the columns
later loads derived from it (``derived-*.bin``: :mod:`holotrace.ingest.derived`).
A load maps ``columns.bin`` read-only: a cached rank comes back without reading its columns into
memory, and a first load writes its columns straight into the folder that becomes the entry. The price
is disk: about 130 bytes per event (a third to a quarter of the JSON's size), several times what a
compressed table would take. Entries are never modified in place (a mapped file must not shrink under
a reader): they are written in a work folder and renamed into place, and replaced or cleared by renaming
and unlinking.

The cache owns only what it made: each entry is a folder with a 24-hex-digit name holding only the
files an entry has, and an ``info.json`` marked with the entry layout's version. A cache folder holds
nothing else: a folder with anything else in it is never written to, and ``clear`` refuses it.

An entry is served only when it is intact and still describes the file: ``info.json`` holds the file's fingerprint
at decode time (device, inode, size, mtime_ns, ctime_ns, a hash of its first and last 64 KiB), the column file's own
(the same but the hash) and a token written into its header, so a rewritten trace, a column file rewritten,
truncated or swapped, or a half-deleted entry is a miss (decoded again and rewritten), never an error or a wrong
answer. An entry written in this boot of the machine is served without reading its columns; one written before a
crash or reboot (or on another machine) has its column file's CRC-32 checked too; ``doctor --verify`` (:func:`verify`)
checks both files' CRC-32s, for damage below the file system. Writers and readers never see half an entry.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from holotrace.atomic import kill_point, sweep, temp_name
from holotrace.errors import HolotraceError
from holotrace.ingest import ids_used
from holotrace.ingest._read import crc32
from holotrace.ingest.columns import Problem
from holotrace.ingest.decoded import DecodedFile
from holotrace.ingest.store import MAGIC
from holotrace.schema import FORMAT_VERSION

TABLES = ("events", "instants", "counters", "flows", "names")
CACHE_VERSION = 8  # layout of an entry: bump when it changes
COLUMNS = "columns.bin"
ENTRY_NAME = re.compile(r"^[0-9a-f]{24}$")
_WORK = (".tmp-", ".old-")  # entries being written or replaced
_LEGACY = {f"{t}.arrow" for t in TABLES}  # files of entries of earlier versions (cleared like the others)
RAW_ARGS = "raw_args.json.gz"  # every event's raw args, kept once a load asked for them (gzip)
_ENTRY_FILES = frozenset({"info.json", "raw_args.json", RAW_ARGS, COLUMNS} | _LEGACY)
DERIVED_FILE = re.compile(r"^derived-[0-9a-z_]{1,32}-[0-9a-f]{16,40}\.bin$")  # (holotrace.ingest.derived)
_EDGE = 64 * 1024  # bytes of a trace's head and tail hashed into its fingerprint


class CacheError(HolotraceError):
    """The cache folder is unusable (empty path, not a folder, or a folder holotrace did not make)."""


# --------------------------------------------------------------------------- the folder


def default_cache_dir() -> Path:
    env = os.environ.get("HOLOTRACE_CACHE_DIR")
    if env and env.strip():
        return resolve_dir(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and xdg.strip() and Path(xdg).expanduser().is_absolute():
        return Path(xdg).expanduser() / "holotrace"
    try:
        home = Path.home()
    except (RuntimeError, KeyError):
        raise CacheError(
            "no cache folder: HOME is not set", fix="pass --cache-dir DIR or set HOLOTRACE_CACHE_DIR"
        ) from None
    return home / ".cache" / "holotrace"


def resolve_dir(cache_dir=None, *, check: bool = False) -> Path:
    """The absolute cache folder for ``cache_dir`` (None: the default); ``check``: raise
    :class:`CacheError` when that folder exists and is not a holotrace cache."""
    if cache_dir is None:
        d = default_cache_dir()
    else:
        if not str(cache_dir).strip():
            raise CacheError(
                "the cache folder is an empty path",
                fix="pass a folder, e.g. --cache-dir ~/.cache/holotrace, or --no-cache",
            )
        d = Path(str(cache_dir)).expanduser()
        if not d.is_absolute():
            d = Path.cwd() / d
    if d.exists() and not d.is_dir():
        raise CacheError("the cache folder is not a folder", path=d, fix="pass a folder for the cache, or --no-cache")
    if check and not _ours(d):
        raise CacheError(
            "is not a holotrace cache folder (it holds other files)",
            path=d,
            fix="pass a new or empty folder as the cache, or --no-cache",
        )
    return d


def _ours(d: Path) -> bool:
    """The folder is a holotrace cache, or may become one: absent, empty, or holding only entries."""
    try:
        return all(_is_entry_name(c.name) and _dir_or_gone(c) for c in d.iterdir())
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _dir_or_gone(c: Path) -> bool:
    """A folder, or a name another process removed since it was listed (a concurrent clear or rename)."""
    try:
        return stat.S_ISDIR(c.lstat().st_mode)
    except FileNotFoundError:
        return True


def _is_entry_name(name: str) -> bool:
    return bool(ENTRY_NAME.match(name)) or name.startswith(_WORK)


def _claim(d: Path) -> bool:
    """Make sure ``d`` exists if it is ours to use; False when it is not."""
    if not _ours(d):
        return False
    d.mkdir(parents=True, exist_ok=True)
    return True


# --------------------------------------------------------------------------- keys and fingerprints


def key_for(path: str | Path, all_args: bool = False, tag: str = "") -> str:
    """Name of a file's entry: its absolute path, the decoder format, the entry layout and ``tag`` (the
    caller's version of what it derives and stores beside the decoded columns). One entry per file whatever
    the load asked for: ``all_args`` does not change the name (an entry keeps the raw args once a load asked
    for them)."""
    p = Path(path).resolve()
    text = f"{p}|v{FORMAT_VERSION}.{CACHE_VERSION}.{tag}"
    return hashlib.sha1(text.encode()).hexdigest()[:24]


def fingerprint(path: str | Path) -> Optional[dict]:
    """What identifies a file's content cheaply: device, inode, size, mtime_ns, ctime_ns and a hash of its head
    and tail. The change time is set by the system on every write, rename or truncation and no user can set it
    back (``touch -r`` restores the modification time only), so a file rewritten in place with the same size
    and modification time is still seen as changed; a rename over the file or a copy to another disk changes
    the inode or device."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            h = hashlib.blake2b(digest_size=16)
            h.update(fh.read(_EDGE))
            if st.st_size > _EDGE:
                fh.seek(max(_EDGE, st.st_size - _EDGE))
                h.update(fh.read(_EDGE))
    except OSError:
        return None
    return {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "ino": st.st_ino,
        "dev": st.st_dev,
        "hash": h.hexdigest(),
    }


# --------------------------------------------------------------------------- reading


def load(path: str | Path, cache_dir: Optional[Path], all_args: bool = False, tag: str = "") -> Optional[DecodedFile]:
    """The cached decode of ``path`` (its tables to be mapped from ``packed``), or None when absent,
    stale or damaged (never an error)."""
    if cache_dir is None:
        return None
    try:
        return _read(cache_dir / key_for(path, all_args, tag), path, all_args)
    except Exception:  # a damaged entry is a miss, never an error
        return None


def _read(entry: Path, path, all_args: bool) -> Optional[DecodedFile]:
    info = json.loads((entry / "info.json").read_text(encoding="utf-8"))
    if not isinstance(info, dict) or info.get("holotrace_cache") != CACHE_VERSION:
        return None
    fp = fingerprint(path)
    if fp is None or info.get("fingerprint") != fp:
        return None
    cols = entry / COLUMNS
    if _stat(cols) != info["columns_stat"] or not _has_token(cols, bytes.fromhex(info["token"])):
        return None
    if (info["boot"] is None or info["boot"] != boot()) and _crc(cols) != info["crc32"]:
        return None  # written before a crash or on another machine: its columns are checked whole
    raw_args = None
    if all_args:
        if not info.get("raw_args"):
            return None  # decoded without them: decoded again with them, and the entry replaced
        import gzip

        raw_args = json.loads(gzip.decompress((entry / RAW_ARGS).read_bytes()))
        if not isinstance(raw_args, list) or len(raw_args) != info["layout"]["events"]["ts_ns"][1]:
            return None
    return DecodedFile(
        path=str(path),
        meta=info["meta"],
        strings=info["strings"],
        events={},
        instants={},
        counters={},
        flows={},
        names={},
        n_trace_events=info["n_trace_events"],
        phase_counts=info["phase_counts"],
        ts_is_float=info["ts_is_float"],
        problems=[Problem(**p) for p in info["problems"]],
        raw_args=raw_args,
        format=info["format"],
        bytes_read=info["bytes_read"],
        packed=(str(cols), info["layout"], bytes.fromhex(info["token"])),
        ids_used=ids_used.decode(info["ids_used"], len(info["strings"])) if info.get("ids_used") is not None else None,
        checks=info.get("checks"),
    )


def _stat(path: Path) -> dict:
    """What changes when a file is rewritten, truncated or replaced through the file system (see :func:`fingerprint`)."""
    st = os.stat(path)
    return {k: getattr(st, f"st_{k}") for k in ("size", "mtime_ns", "ctime_ns", "ino", "dev")}


def _has_token(path: Path, token: bytes) -> bool:
    """The packed file's header holds the entry's token (another entry's column file does not)."""
    with open(path, "rb", buffering=0) as fh:
        return fh.read(len(MAGIC) + len(token)) == MAGIC + token


@functools.lru_cache(maxsize=1)
def boot() -> Optional[str]:
    """This boot of the machine (Linux), or None where it is unknown: data an entry wrote is on its disk or in this
    boot's page cache; only a crash, which ends the boot, can lose what was not yet written out."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(4 << 20)
        view = memoryview(buf)
        while True:
            k = fh.readinto(buf)
            if not k:
                return crc
            crc = crc32(view[:k], crc)


# --------------------------------------------------------------------------- writing

_pending: list = []


def work_dir(cache_dir: Optional[Path]) -> Optional[Path]:
    """A new work folder inside the cache folder, where a decode writes what becomes an entry (None when
    the folder is not a holotrace cache or not writable)."""
    if cache_dir is None:
        return None
    try:
        if not _claim(cache_dir):
            return None
        sweep(cache_dir)  # work folders of killed loads of this machine
        return Path(tempfile.mkdtemp(prefix=temp_name() + "-", dir=cache_dir))
    except OSError:
        return None


def in_background(write: Callable[[], object]) -> None:
    """Run a cache write (e.g. :func:`commit`) on a thread of its own, so analyses can start at once; ``flush()``
    waits for it (it also runs at interpreter exit)."""
    import threading

    t = threading.Thread(target=write, name="holotrace-cache-write", daemon=False)
    t.start()
    _pending.append(t)


def flush() -> None:
    """Wait until every background cache write has finished."""
    while _pending:
        _pending.pop().join()


atexit.register(flush)


def commit(
    d: DecodedFile, work: Path, cache_dir: Path, all_args: bool = False, tag: str = "", fp: Optional[dict] = None
) -> Optional[Path]:
    """Make the work folder ``work`` (holding ``d``'s packed columns) the entry of ``d``'s file.

    Returns the entry folder, or None when it was not made (the file changed since ``fp`` was taken, or
    the folder could not be written): the work folder is removed then.
    """
    try:
        now = fingerprint(d.path)
        if now is None or (fp is not None and fp != now) or d.packed is None:
            return None  # the file changed while it was decoded: its entry would not describe it
        entry = cache_dir / key_for(d.path, all_args, tag)
        cols = work / COLUMNS
        _, layout, token = d.packed
        info = {
            "holotrace_cache": CACHE_VERSION,
            "token": token.hex(),
            "fingerprint": now,
            "layout": layout,
            "bytes": cols.stat().st_size,
            "crc32": d.columns_crc32 if d.columns_crc32 is not None else _crc(cols),
            "columns_stat": _stat(cols),
            "boot": d.boot if d.boot == boot() else None,  # the columns' writer: this machine, this boot
            "meta": d.meta,
            "strings": d.strings,
            "n_trace_events": d.n_trace_events,
            "phase_counts": d.phase_counts,
            "ts_is_float": d.ts_is_float,
            "problems": [dict(p.__dict__, code=str(p.code)) for p in d.problems],
            "format": d.format,
            "bytes_read": d.bytes_read,
            "ids_used": ids_used.encode(d.ids_used) if d.ids_used is not None else None,
            "checks": d.checks,
            "source": str(Path(d.path).resolve()),
            "content_crc32": d.content_crc32 if d.content_crc32 is not None else _crc(Path(d.path)),  # for verify()
        }
        if fingerprint(d.path) != now:
            return None  # the file changed while it was hashed
        if d.raw_args is not None:
            import gzip

            (work / RAW_ARGS).write_bytes(gzip.compress(json.dumps(d.raw_args).encode("utf-8"), compresslevel=1))
            info["raw_args"] = True
        with open(work / "info.json", "w", encoding="utf-8") as fh:  # last: an entry without it is no entry
            fh.write(json.dumps(info, default=str))
            fh.flush()
            os.fsync(fh.fileno())  # the columns need not be: their CRC-32 is checked on every read
        kill_point("cache")
        old = None
        if entry.exists():
            old = cache_dir / temp_name("old")
            try:
                os.rename(entry, old)
            except OSError:
                old = None
        os.rename(work, entry)  # fails when another writer put its entry there first: theirs stays
        work = None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return entry
    except Exception:  # the cache is an optimisation: a failed write is no error
        return None
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- verifying


def verify(path: str | Path, cache_dir: Optional[Path], all_args: bool = False, tag: str = "") -> str:
    """Check the entry of ``path`` against the file's and the column file's whole content (CRC-32s of every byte,
    taken when the entry was written): ``"absent"`` (no entry, or one a load would not serve), ``"ok"``, or
    ``"stale"`` (a content differs although the fingerprints match: the entry is removed, so the next load decodes
    the file). The fingerprints a load checks see every rewrite a user or a tool makes through the file system; this
    reads every byte, for a change made below it (a disk image edited offline, a clock set back and the change time
    forged, a damaged disk)."""
    if cache_dir is None:
        return "absent"
    entry = cache_dir / key_for(path, all_args, tag)
    try:
        if _read(entry, path, all_args) is None:
            return "absent"
        info = json.loads((entry / "info.json").read_text(encoding="utf-8"))
        if info.get("content_crc32") == _crc(Path(path)) and info.get("crc32") == _crc(entry / COLUMNS):
            return "ok"
    except Exception:  # no entry, or a damaged one (a load would not serve it either)
        return "absent"
    _remove(entry, cache_dir)
    return "stale"


def _remove(entry: Path, cache_dir: Path) -> None:
    """Take ``entry`` out of the cache at once (renamed, then deleted): a concurrent load never sees half of it."""
    old = cache_dir / temp_name("old")
    try:
        os.rename(entry, old)
    except OSError:
        return
    shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------- status


def status(cache_dir: Optional[Path] = None) -> dict:
    """``{"folder", "exists", "entries", "bytes", "with_raw_args", "work", "other"}`` of a cache folder: its entries,
    their size on disk, those keeping raw args, folders being written (or left by a killed run) and other items."""
    d = cache_dir if cache_dir is not None else default_cache_dir()
    out = {"folder": str(d), "exists": d.is_dir(), "entries": 0, "bytes": 0, "with_raw_args": 0, "work": 0, "other": 0}
    if not out["exists"]:
        return out
    for child in d.iterdir():
        files = _entry_files(child)
        if files is None:
            out["other"] += 1
            continue
        if child.name.startswith(_WORK):
            out["work"] += 1
            continue
        out["entries"] += 1
        for f in files:
            try:
                out["bytes"] += f.stat().st_size
            except OSError:
                pass
            out["with_raw_args"] += f.name == RAW_ARGS
    return out


# --------------------------------------------------------------------------- clearing


class Cleared(tuple):
    """(entries removed, bytes freed); ``left``: things in the folder that were not entries (kept)."""

    left: int = 0


def clear(cache_dir: Optional[Path] = None) -> Cleared:
    """Remove every cache entry of a holotrace cache folder: (entries removed, bytes freed).

    Raises :class:`CacheError` for a folder that is not a holotrace cache: nothing in it is touched then.
    """
    flush()
    d = cache_dir if cache_dir is not None else default_cache_dir()
    if not d.exists():
        return Cleared((0, 0))
    if not d.is_dir():
        raise CacheError(
            "the cache folder is not a folder", path=d, fix="pass the cache folder ('holotrace cache dir' prints it)"
        )
    if not _ours(d):
        raise CacheError(
            "is not a holotrace cache folder (it holds files that are not cache entries): nothing was removed",
            path=d,
            fix="pass the cache folder ('holotrace cache dir' prints it)",
        )
    n = size = left = 0
    for child in d.iterdir():
        files = _entry_files(child)
        if files is None:
            left += 1
            continue
        for f in files:
            try:
                size += f.stat().st_size
            except OSError:
                pass
        shutil.rmtree(child, ignore_errors=True)
        n += not child.name.startswith(_WORK)
    out = Cleared((n, size))
    out.left = left
    return out


def _entry_files(child: Path) -> Optional[list]:
    """The files of a cache entry, or None when ``child`` is not one (then it is left alone)."""
    if not _is_entry_name(child.name) or child.is_symlink() or not child.is_dir():
        return None
    try:
        files = list(child.iterdir())
    except OSError:
        return []
    ok = lambda f: (f.name in _ENTRY_FILES or DERIVED_FILE.match(f.name)) and not f.is_symlink() and f.is_file()  # noqa: E731
    return files if all(ok(f) for f in files) else None
