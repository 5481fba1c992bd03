"""``holotrace.load``: from a folder of trace files to a validated ``Job``."""

from __future__ import annotations

import functools
import gc
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import numpy as np

from holotrace.errors import HolotraceError, JobConsistencyError, TraceEventError, TraceFormatError, TraceReadError
from holotrace.exec.pool import plan, run_map, thread_map
from holotrace.ingest import _scan, cache as cache_mod
from holotrace.ingest.decode import DecodedFile, decode_into, set_tables
from holotrace.ingest.store import PackedWriter, Spill, SpillError, open_packed, temp_folder
from holotrace.ingest.discover import discover
from holotrace.findings import Finding, FindingCode
from holotrace.schema import ID_COLUMNS, event_columns
from holotrace.model.classify import RULES_VERSION
from holotrace.model.rule_table import resolve_table
from holotrace.model.derive import DERIVED, derive
from holotrace.model.job import Job, RankTrace
from holotrace.model.strings import StringTable
from holotrace.model.validate import findings_from_problems, validate_job

log = logging.getLogger("holotrace")


PathLike = Union[str, Path]
CACHE_TAG = f"rules{RULES_VERSION}"  # cached entries hold derived columns: the rule table's version keys them
_EVENT_CODES = frozenset({FindingCode.MISSING_TIME, FindingCode.NEGATIVE_DURATION, FindingCode.BAD_TIME, FindingCode.BAD_NUMBER})  # strict: TraceEventError
#: codes of findings that count events left out of the tables
_DROP_CODES = _EVENT_CODES
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


def _load_file(task: tuple, on_bytes: Optional[Callable[[int], None]] = None):
    """Worker: one file to derived columns, through the cache; a :class:`_Failed` when it cannot be decoded."""
    try:
        return _load_file_or_raise(task, on_bytes)
    except HolotraceError as e:
        return _Failed(e)


def _load_file_or_raise(task: tuple, on_bytes: Optional[Callable[[int], None]] = None) -> DecodedFile:
    """One file, through the cache: its columns decoded and derived into a packed file (in a cache work
    folder, else a private temporary folder) that the parent maps; ``d.packed`` names it."""
    path, use_cache, cache_dir, all_args, threads = task  # cache hits were taken by load() already
    fp = cache_mod.fingerprint(path) if use_cache else None  # the file as it is decoded: its entry describes it
    gc_was = gc.isenabled()
    gc.disable()  # no cycles are created while decoding; the collector only costs time
    try:
        return _decode_and_pack(path, use_cache, cache_dir, all_args, threads, fp, on_bytes)
    except SpillError as e:
        raise _no_room(e, path) from None
    finally:
        if gc_was:
            gc.enable()


def _decode_and_pack(path, use_cache: bool, cache_dir, all_args: bool, threads: int, fp, on_bytes) -> DecodedFile:
    """Decode into a spill, derive, and pack into a cache work folder (else a private temporary one)."""
    with Spill() as spill:
        d = decode_into(path, spill, all_args=all_args, workers=threads, on_bytes=on_bytes)
        derive(spill, d.strings)
        _scan.trim()  # derivation's chunks are gone: give their memory back
        token = os.urandom(16)
        work = cache_mod.work_dir(cache_dir) if use_cache else None
        cached = work is not None
        if work is not None:
            try:
                layout = spill.pack(work / cache_mod.COLUMNS, _ORDER, token)
            except OSError:  # the work folder went (a concurrent clear) or the cache's disk is full
                shutil.rmtree(work, ignore_errors=True)
                work, cached = None, False
        if work is None:
            work = temp_folder()
            try:
                layout = spill.pack(work / cache_mod.COLUMNS, _ORDER, token)
            except OSError as e:
                shutil.rmtree(work, ignore_errors=True)
                raise SpillError(e.errno, e.strerror or str(e), str(work.parent)) from None
    d.packed = (str(work / cache_mod.COLUMNS), layout, token)
    d.meta["_holotrace_work"] = (str(work), cached, fp)
    return d


def _map(d: DecodedFile, cache_dir, all_args: bool) -> DecodedFile:
    """Map ``d``'s packed columns; then its work folder becomes its cache entry (on a thread), or goes."""
    work = d.meta.pop("_holotrace_work", None)
    try:
        set_tables(d, open_packed(*d.packed))
    finally:
        if work is not None:
            folder, cached, fp = work
            if cached:
                cache_mod.commit_in_background(d, Path(folder), cache_dir, all_args, CACHE_TAG, fp)
            else:
                shutil.rmtree(folder, ignore_errors=True)  # the mapping keeps the file's data while it is used
    return d


def load(path: Union[PathLike, Sequence[PathLike]], *, strict: bool = False, cache: bool = True,
         cache_dir: Optional[PathLike] = None, workers: Optional[int] = None, all_args: bool = False,
         progress: Optional[Callable[[int, int, str], None]] = None, progress_bar: Optional[bool] = None,
         rules=None) -> Job:
    """Load a job: a folder of per-rank trace files, one file, or a list of files.

    Parameters
    ----------
    path: folder, file, or list of files (plain or gzipped Kineto JSON; names do not matter).
    strict: raise :class:`~holotrace.errors.JobConsistencyError` on missing, duplicated or mixed ranks
        and on damaged files, instead of reporting them as findings.
    cache: reuse/write decoded tables in the on-disk cache (``cache_dir``, default the user's cache dir).
    workers: cores used to decode files (default: all): one process per file up to the number of files,
        cores and what memory holds; the cores left over scan each big file on threads.
    all_args: also keep every event's raw ``args`` text (``RankTrace.raw_args``).
    progress: called as ``progress(done, total, file)`` after each file.
    progress_bar: show a progress bar (bytes decoded, files done) on stderr for loads longer than a
        second; default: when stderr is a terminal.
    rules: a user's rules file (or a list of them, or a ``RuleTable``) tried before the built-in rule table when
        holotrace's rules classify this job's events (docs/rules.md); default: the files named by
        ``$HOLOTRACE_RULES``. A bad file raises :class:`~holotrace.errors.RulesError` naming its line.

    Returns a :class:`~holotrace.model.job.Job`; everything doubtful is in ``job.findings``.
    """
    table = resolve_table(rules)  # a bad rules file fails before any decoding
    found = discover(path, strict=strict)
    explicit = isinstance(path, (list, tuple)) or not Path(path).is_dir()
    cdir = cache_mod.resolve_dir(cache_dir, check=True) if cache else None
    files = found.files
    sizes = [_size(f.path) for f in files]
    t0 = time.perf_counter()
    # cache hits are read here (a worker would only add a copy); misses are decoded by the pool
    hits = thread_map(lambda i: _hit(files[i].path, cdir, all_args), range(len(files))) if cache else {}  # CRC checks on threads
    decoded: list = [hits.get(i) for i in range(len(files))]
    misses = [i for i, d in enumerate(decoded) if d is None]
    procs, threads = plan(workers, [sizes[i] for i in misses])
    tasks = [(files[i].path, cache, cdir, all_args, t) for i, t in zip(misses, threads)]
    bar = _Bar([sizes[i] for i in misses], len(files), progress_bar)

    def done(i: int, _r) -> None:
        bar.file_done(i in miss_set)
        if progress:
            progress(bar.files, len(files), files[i].path)

    miss_set = set(misses)
    for i, d in enumerate(decoded):
        if d is not None:
            done(i, d)
    try:
        fn = functools.partial(_load_file, on_bytes=bar.bytes_read) if procs <= 1 and bar.shown else _load_file
        for i, d in zip(misses, run_map(fn, tasks, procs, lambda k, r: done(misses[k], r))):
            decoded[i] = d
        for i, d in enumerate(decoded):
            if isinstance(d, DecodedFile):
                try:
                    decoded[i] = _map(d, cdir, all_args)
                except (OSError, ValueError):  # its cache entry or work folder went meanwhile (a concurrent clear): decode again
                    again = _load_file((files[i].path, False, None, all_args, 1))
                    decoded[i] = _map(again, None, all_args) if isinstance(again, DecodedFile) else again
    except BaseException:
        for d in decoded:  # nothing decoded for this load outlives it
            _discard(d)
        raise
    finally:
        bar.close()
    findings = list(found.findings)
    skipped = list(found.skipped)
    failed = [(f, d) for f, d in zip(files, decoded) if isinstance(d, _Failed)]
    if failed and (explicit or len(failed) == len(files)):
        raise failed[0][1].error()
    for f, d in failed:  # a file of a folder that cannot be read at all: the others load, loudly
        skipped.append((f.path, d.problem))
        findings.append(Finding.of(FindingCode.SKIPPED_FILE, f"not loaded, rank {f.rank} is missing from every number: {d.problem}"
                                   + (f" ({d.fix})" if d.fix else ""), rank=f.rank, file=f.path))
    strings = StringTable()
    traces: dict[int, RankTrace] = {}
    for f, d in zip(files, decoded):
        if isinstance(d, _Failed):
            continue
        remap = strings.merge(d.strings)
        same = bool((remap == np.arange(len(remap))).all())  # the first file's ids (or a file like it) are the job's ids
        tables = {t: dict(getattr(d, t)) for t in ID_COLUMNS}
        if not same:
            try:
                _renumber(tables, remap, len(strings))
            except SpillError as e:
                raise _no_room(e, f.path) from None
        meta = dict(d.meta)
        meta.pop("_holotrace_cached", None)
        findings.extend(findings_from_problems(d.problems, f.rank, f.path))
        traces[f.rank] = RankTrace(f.rank, f.path, meta, tables["events"], {k: tables[k] for k in ("instants", "counters", "flows", "names")},
                                   strings, ts_is_float=d.ts_is_float, n_trace_events=d.n_trace_events, phase_counts=d.phase_counts,
                                   raw_args=d.raw_args, format=d.format)
        traces[f.rank].release_pages()  # what renumbering and deriving read is paged in again when used
    if traces and all(t.n_events == 0 for t in traces.values()):
        names = ", ".join(Path(t.file).name for t in traces.values())
        dropped = [x for x in findings if x.code in _DROP_CODES]
        if dropped:
            raise TraceEventError(f"no usable events with a duration in {names}: {sum(x.count for x in dropped)} left out "
                                  f"({dropped[0].code.value}: {dropped[0].message}{' e.g. ' + dropped[0].example if dropped[0].example else ''})",
                                  path=str(path) if not isinstance(path, (list, tuple)) else None, fix="the file is damaged; re-export the trace")
        raise TraceFormatError(f"no events with a duration in {names} (metadata only?)", path=str(path) if not isinstance(path, (list, tuple)) else None,
                               fix="pass a trace recorded while the profiler was active")
    job = Job(traces=traces, strings=strings, findings=findings, skipped=skipped, path=str(path), rule_table=table)
    job.findings.extend(validate_job(job))
    log.info("loaded %d rank(s) in %.2f s", len(traces), time.perf_counter() - t0)
    if strict:
        serious = [x for x in job.findings if x.severity == "error"]
        if serious:
            cls = TraceEventError if serious[0].code in _EVENT_CODES else JobConsistencyError
            raise cls(serious[0].message, path=serious[0].file, fix="load without strict to get the valid part and every finding")
    return job


def _renumber(tables: dict, remap: np.ndarray, n_job: int) -> None:
    """Replace a file's string-id columns by the job's ids (-1 stays -1), in the smallest type: written in
    chunks into a packed file of their own and mapped, like the decoded columns. Columns without any id stay."""
    lut = np.append(remap, -1).astype(np.int16 if n_job < 2**15 else np.int32)  # id -1 reads the last slot
    todo = {t: {c: (len(tables[t][c]), lut.dtype) for c in ids if c in tables[t] and int(tables[t][c].max(initial=-1)) >= 0}
            for t, ids in ID_COLUMNS.items()}
    todo = {t: cols for t, cols in todo.items() if cols}
    if not todo:
        return
    step = 1 << 20
    folder = temp_folder()
    try:
        token = os.urandom(16)
        w = PackedWriter(folder / "renumbered", todo, token)
        try:
            for t, cols in todo.items():
                for c in cols:
                    ids = tables[t][c]
                    for a in range(0, len(ids), step):
                        w.write(t, c, a, lut[ids[a:a + step]])
        finally:
            layout = w.close()
        for t, cols in open_packed(folder / "renumbered", layout, token).items():
            tables[t].update(cols)
    except OSError as e:
        raise SpillError(e.errno, e.strerror or str(e), str(folder.parent)) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the mapping keeps the data while it is used


def _no_room(e: SpillError, path) -> TraceReadError:
    return TraceReadError(f"cannot write the decoded columns to {e.filename} ({e.strerror})", path=path,
                          fix="free disk space there, or point TMPDIR at a writable folder with room")


def _discard(d) -> None:
    """Remove the work folder of a decoded file that will not be mapped (the load failed meanwhile)."""
    work = d.meta.pop("_holotrace_work", None) if isinstance(d, DecodedFile) else None
    if work is not None:
        shutil.rmtree(work[0], ignore_errors=True)


def _hit(path: str, cdir, all_args: bool) -> Optional[DecodedFile]:
    d = cache_mod.load(path, cdir, all_args, CACHE_TAG)
    if d is not None:
        d.meta["_holotrace_cached"] = True
    return d


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class _Bar:
    """The load's progress bar (tqdm) on stderr: bytes decoded and files done; silent when not shown.

    Bytes are file bytes: a file decoded in this process reports its reading as it goes (a gzip
    file's uncompressed bytes are capped at its size); a file decoded by a worker counts when done.
    """

    def __init__(self, sizes: list, n_files: int, show: Optional[bool]):
        self.files = 0
        self.n_files = n_files
        self._sizes = sizes
        self._k = 0  # the file being decoded (index into sizes)
        self._counted = 0  # bytes reported for it so far
        self._bar = None
        if show is None:
            show = sys.stderr.isatty()
        if show and sum(sizes) > 0:
            from tqdm import tqdm

            self._bar = tqdm(total=sum(sizes), unit="B", unit_scale=True, unit_divisor=1024, desc="decoding",
                             file=sys.stderr, delay=1.0, leave=False, dynamic_ncols=True)
            self._bar.set_postfix_str(f"0/{n_files} files", refresh=False)

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def bytes_read(self, k: int) -> None:
        if self._bar is not None and self._k < len(self._sizes):
            k = min(k, self._sizes[self._k] - self._counted)
            if k > 0:
                self._counted += k
                self._bar.update(k)

    def file_done(self, decoded: bool) -> None:
        self.files += 1
        if decoded and self._k < len(self._sizes):
            rest = self._sizes[self._k] - self._counted
            self._k += 1
            self._counted = 0
            if self._bar is not None and rest > 0:
                self._bar.update(rest)
        if self._bar is not None:
            self._bar.set_postfix_str(f"{self.files}/{self.n_files} files")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
