"""One trace file to columns: the task a load gives its process pool for each file not in the cache (decode into a
spill, derive, pack into a cache work folder or use the columns from memory), and mapping what it gave."""

from __future__ import annotations

import dataclasses
import functools
import gc
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from holotrace.atomic import kill_point
from holotrace.errors import HolotraceError, TraceReadError
from holotrace.ingest import _scan, store
from holotrace.ingest import cache as cache_mod
from holotrace.ingest.decoded import DecodedFile, set_tables
from holotrace.ingest.store import Spill, SpillError, open_packed, spill_memory, temp_folder
from holotrace.model.classify import RULES_VERSION
from holotrace.model.derive import DERIVED, derive
from holotrace.model.validate import rank_checks
from holotrace.schema import event_columns

CACHE_TAG = f"rules{RULES_VERSION}"  # cached entries hold derived columns: the rule table's version keys them
_ORDER = {"events": [c for c, _ in event_columns()] + list(DERIVED)}  # the events' columns: schema, then derived


class _Failed:
    """A file that could not be decoded at all (sent back by a worker instead of raising, so that the
    other files of a folder still load)."""

    def __init__(self, error: HolotraceError):
        self.kind = type(error).__name__
        self.problem, self.path, self.fix = error.problem, error.path, error.fix

    def error(self) -> HolotraceError:
        import holotrace.errors as errors_mod

        cls = getattr(errors_mod, self.kind, HolotraceError)
        return cls(self.problem, path=self.path, fix=self.fix)


@dataclass(frozen=True)
class CacheSession:
    """The cache as one load uses it: its folder (None: no cache), whether raw ``args`` are kept, the rules'
    tag. It travels with each :class:`LoadTask` to the worker."""

    folder: Optional[Path]
    all_args: bool = False
    tag: str = CACHE_TAG

    @property
    def on(self) -> bool:
        return self.folder is not None

    def hit(self, path: str) -> Optional[DecodedFile]:
        """The file's cached decode (its tables to be mapped), or None."""
        return cache_mod.load(path, self.folder, self.all_args, self.tag) if self.on else None

    def fingerprint(self, path: str):
        return cache_mod.fingerprint(path) if self.on else None

    def work_folder(self) -> Optional[Path]:
        """A folder in the cache where a decode writes what becomes the file's entry (None: no cache, or no room)."""
        return cache_mod.work_dir(self.folder) if self.on else None

    def keep(self, d: DecodedFile, work: WorkFolder) -> None:
        """Make ``work`` the file's cache entry (on a thread)."""
        cache_mod.in_background(
            functools.partial(
                cache_mod.commit, d, Path(work.path), self.folder, self.all_args, self.tag, work.fingerprint
            )
        )


@dataclass(frozen=True)
class LoadTask:
    """One file for a worker to decode: the file, the cache session and how many threads scan it."""

    path: str
    session: CacheSession
    threads: int = 1
    at_once: bool = False  # decoded in the loading process: the spill's columns are used as they are


@dataclass(frozen=True)
class WorkFolder:
    """Where a worker wrote a file's packed columns: a cache work folder (``cached``: it becomes the file's entry
    once mapped) or a private temporary folder (removed once mapped); ``fingerprint``: the file as decoded."""

    path: str
    cached: bool
    fingerprint: object = None


@dataclass
class Decoded:
    """A worker's result: the decoded file, to be mapped from ``work``."""

    file: DecodedFile
    work: WorkFolder


def _load_file(task: LoadTask, on_bytes: Optional[Callable[[int], None]] = None):
    """Worker: one file to derived columns, through the cache; a :class:`_Failed` when it cannot be decoded."""
    kill_point(f"load-{Path(task.path).name}")
    try:
        return _load_file_or_raise(task, on_bytes)
    except HolotraceError as e:
        return _Failed(e)


def _load_file_or_raise(task: LoadTask, on_bytes: Optional[Callable[[int], None]] = None) -> Decoded | Ready:
    """One file: its columns decoded and derived into a packed file (in a cache work folder, else a private
    temporary folder) that the parent maps, or ready to use as they are (:func:`_ready`) (cache hits were taken by
    :func:`load` already)."""
    fp = task.session.fingerprint(task.path)  # the file as it is decoded: its entry describes it
    gc_was = gc.isenabled()
    gc.disable()  # no cycles are created while decoding; the collector only costs time
    try:
        return _decode_and_pack(task, fp, on_bytes)
    except SpillError as e:
        raise _no_room(e, task.path) from None
    finally:
        if gc_was:
            gc.enable()


def _decode_and_pack(task: LoadTask, fp, on_bytes) -> Decoded | Ready:
    """Decode into a spill, derive, and pack into a cache work folder (else a private temporary one); with
    ``task.at_once``, the spill's columns are used as they are (:func:`_ready`)."""
    s = task.session  # with a cache, the file's CRC-32 is taken while decoding (for its entry)
    from holotrace.ingest.decode import decode_into  # (a cache hit never imports the decoder)

    spill = Spill(memory=spill_memory(task.path))
    try:
        d = decode_into(task.path, spill, all_args=s.all_args, workers=task.threads, on_bytes=on_bytes, checksum=s.on)
        derive(spill, d.strings)
        _scan.trim()  # derivation's chunks are gone: give their memory back
        if task.at_once:
            spill, held = None, spill  # (its columns now belong to the decoded file and its cache write)
            return _ready(d, held, task.session, fp)
        token = os.urandom(16)
        work = task.session.work_folder()
        cached = work is not None
        if work is not None:
            try:
                layout = spill.pack(work / cache_mod.COLUMNS, _ORDER, token)
                d.checks = _read_back_checks(work, layout, token, d)
            except (OSError, ValueError):  # the work folder went (a concurrent clear) or the cache's disk is full
                shutil.rmtree(work, ignore_errors=True)
                work, cached = None, False
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)  # nothing decoded outlives a failed load
                raise
        if work is None:
            work = temp_folder()
            try:
                layout = spill.pack(work / cache_mod.COLUMNS, _ORDER, token)
            except OSError as e:
                shutil.rmtree(work, ignore_errors=True)
                raise SpillError(e.errno, e.strerror or str(e), str(work.parent)) from None
            try:
                d.checks = _read_back_checks(work, layout, token, d)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)  # nothing decoded outlives a failed load
                raise
        d.columns_crc32 = spill.packed_crc32  # taken while packing: the cache entry need not read the file
    finally:
        if spill is not None:
            spill.close()
    d.packed, d.boot = (str(work / cache_mod.COLUMNS), layout, token), cache_mod.boot()
    return Decoded(d, WorkFolder(str(work), cached, fp))


@dataclass
class Ready:
    """A file decoded in the loading process, its columns ready to use as they are (nothing to map)."""

    file: DecodedFile


def _ready(d: DecodedFile, spill: Spill, session: CacheSession, fp) -> Ready:
    """A file decoded in the loading process: its tables are the spill's columns as they are, joined in memory (a
    JSON of up to about 180 MB) or their files mapped, and its packed file (the cache entry) is written from them
    on a thread while the analyses run (:func:`~holotrace.ingest.cache.flush` waits for it; at exit too). Without a
    cache there is no packed file at all. The 100 MB generated rank, in process: the load returns in 0.30 s instead
    of 0.36 s (medians), 0.32 s with its cache write; 0.29 s instead of 0.36 s without a cache."""
    try:
        set_tables(d, spill.join(_ORDER) if spill.in_memory else spill.mapped(_ORDER))
        d.checks = rank_checks(d.events, d.strings)
        work = session.work_folder()
    except BaseException:
        spill.close()
        raise
    if work is None:
        spill.close()  # (a mapped column file outlives its folder)
    else:
        cache_mod.in_background(functools.partial(_pack_and_keep, d, spill, work, session, fp))
    return Ready(d)


def _pack_and_keep(d: DecodedFile, spill: Spill, work: Path, session: CacheSession, fp) -> None:
    """On the cache's thread: pack the joined columns into ``work``, then make it the file's entry (a cache
    write that fails leaves no entry and no folder, and no error: the cache is an optimisation)."""
    try:
        token = os.urandom(16)
        layout = spill.pack(work / cache_mod.COLUMNS, _ORDER, token)
        crc = spill.packed_crc32
    except Exception:
        shutil.rmtree(work, ignore_errors=True)
        return
    finally:
        spill.close()
    packed = dataclasses.replace(  # (the entry's description; the loaded file's fields stay as they are)
        d, packed=(str(work / cache_mod.COLUMNS), layout, token), boot=cache_mod.boot(), columns_crc32=crc
    )
    cache_mod.commit(packed, work, session.folder, session.all_args, session.tag, fp)


def _read_back_checks(work: Path, layout, token: bytes, d: DecodedFile):
    """The event checks, on the packed columns read back while their pages are warm."""
    return rank_checks(store.open_packed(str(work / cache_mod.COLUMNS), layout, token)["events"], d.strings)


def _map(r, session: CacheSession) -> DecodedFile:
    """Map a file's packed columns (a cache hit, or a worker's :class:`Decoded`); then the worker's folder
    becomes the file's cache entry (on a thread), or goes."""
    if isinstance(r, Ready):
        return r.file
    if not isinstance(r, Decoded):
        set_tables(r, open_packed(*r.packed))
        return r
    try:
        set_tables(r.file, open_packed(*r.file.packed))
    finally:
        if r.work.cached:
            session.keep(r.file, r.work)
        else:
            shutil.rmtree(r.work.path, ignore_errors=True)  # the mapping keeps the file's data while it is used
    return r.file


def _no_room(e: SpillError, path) -> TraceReadError:
    from holotrace.errors import NoRoomError

    return NoRoomError(
        f"cannot write the decoded columns to {e.filename} ({e.strerror})",
        path=path,
        fix="free disk space there, or point TMPDIR at a writable folder with room",
    )
