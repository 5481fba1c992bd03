"""``holotrace.load``: from a folder of trace files to a validated ``Job``."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from holotrace.errors import JobConsistencyError, TraceEventError, TraceFormatError, WorkerLostError
from holotrace.exec.pool import plan, thread_map
from holotrace.exec.progress import DecodeBar
from holotrace.exec.retry import run_map_retrying
from holotrace.exec.tasks import TaskFailed
from holotrace.findings import Finding, FindingCode
from holotrace.ingest import cache as cache_mod
from holotrace.ingest.decoded import DecodedFile
from holotrace.ingest.derived import EntryStore
from holotrace.ingest.discover import discover
from holotrace.ingest.renumber import holding_moved as _holding_moved
from holotrace.ingest.renumber import renumber as _renumber
from holotrace.ingest.store import Spill as Spill  # (the spill a decode packs, for the load benchmark's timings)
from holotrace.ingest.store import SpillError
from holotrace.loader.one_file import (
    CACHE_TAG,
    CacheSession,
    Decoded,
    LoadTask,
    _Failed,
    _load_file,
    _load_file_or_raise,
    _map,
    _no_room,
)
from holotrace.model.job import Job, RankTrace
from holotrace.model.rule_table import resolve_table
from holotrace.model.strings import StringTable
from holotrace.model.validate import findings_from_problems, validate_job
from holotrace.schema import ID_COLUMNS

__all__ = ["load", "load_with", "LoadOptions", "CACHE_TAG", "CacheSession", "LoadTask", "_load_file_or_raise"]

log = logging.getLogger("holotrace")


PathLike = Union[str, Path]
_EVENT_CODES = frozenset(
    {FindingCode.MISSING_TIME, FindingCode.NEGATIVE_DURATION, FindingCode.BAD_TIME, FindingCode.BAD_NUMBER}
)  # strict: TraceEventError
#: codes of findings that count events left out of the tables
_DROP_CODES = _EVENT_CODES


@dataclass(frozen=True)
class LoadOptions:
    """How :func:`load` reads a job (see its parameters)."""

    strict: bool = False
    cache: bool = True
    cache_dir: Optional[PathLike] = None
    workers: Optional[int] = None
    all_args: bool = False
    executor: object = None  # an Executor for per-file work beyond this machine's pool (None: the local pool)
    progress: Optional[Callable[[int, int, str], None]] = None
    progress_bar: Optional[bool] = None
    rules: object = None  # users' rules files (or a RuleTable) for holotrace's rule set; None: $HOLOTRACE_RULES


def load(
    path: Union[PathLike, Sequence[PathLike]],
    *,
    strict: bool = False,
    cache: bool = True,
    cache_dir: Optional[PathLike] = None,
    workers: Optional[int] = None,
    all_args: bool = False,
    progress: Optional[Callable[[int, int, str], None]] = None,
    progress_bar: Optional[bool] = None,
    executor=None,
    rules=None,
) -> Job:
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
    executor: an :class:`~holotrace.exec.executor.Executor` (e.g. Ray's) that decodes the files instead of
        this machine's process pool (its workers must reach the files and, with ``cache``, the cache folder).

    rules: a user's rules file (or a list of them, or a ``RuleTable``) tried before the built-in rule table when
        holotrace's rules classify this job's events (docs/rules.md); default: the files named by
        ``$HOLOTRACE_RULES``. A bad file raises :class:`~holotrace.errors.RulesError` naming its line.

    Returns a :class:`~holotrace.model.job.Job`; everything doubtful is in ``job.findings``.
    """
    return load_with(
        path, LoadOptions(strict, cache, cache_dir, workers, all_args, executor, progress, progress_bar, rules)
    )


def load_with(path: Union[PathLike, Sequence[PathLike]], opts: LoadOptions) -> Job:
    """:func:`load` with its options in one object."""
    table = resolve_table(opts.rules)  # a bad rules file fails before any decoding
    found = discover(path, strict=opts.strict)
    session = CacheSession(cache_mod.resolve_dir(opts.cache_dir, check=True) if opts.cache else None, opts.all_args)
    t0 = time.perf_counter()
    decoded = _decode_all(found.files, session, opts)
    job = _job_of(path, found, decoded)
    job.rule_table = table
    log.info("loaded %d rank(s) in %.2f s", len(job.traces), time.perf_counter() - t0)
    if opts.strict:
        serious = [x for x in job.findings if x.severity == "error"]
        if serious:
            cls = TraceEventError if serious[0].code in _EVENT_CODES else JobConsistencyError
            raise cls(
                serious[0].message,
                path=serious[0].file,
                fix="load without strict to get the valid part and every finding",
            )
    for f, d in zip(found.files, decoded):  # no fault of the file, and a fix the user can apply: said at once
        if isinstance(d, _Failed) and d.kind == WorkerLostError.__name__:
            log.warning("%s: rank %s not loaded: %s (%s)", f.path, f.rank, d.problem, d.fix)
    return job


def _decode_all(files: list, session: CacheSession, opts: LoadOptions) -> list:
    """Per file, its mapped :class:`DecodedFile` or a :class:`_Failed`: cache hits read here (a worker would
    only add a copy), the misses decoded by the pool (or the executor), then every file mapped."""
    sizes = [_size(f.path) for f in files]
    hits = thread_map(lambda i: session.hit(files[i].path), range(len(files))) if session.on else {}  # CRCs on threads
    decoded: list = [hits.get(i) for i in range(len(files))]
    misses = [i for i, d in enumerate(decoded) if d is None]
    procs, threads = plan(opts.workers, [sizes[i] for i in misses])
    at_once = len(misses) == 1  # (one file to decode: this process decodes it)
    tasks = [LoadTask(files[i].path, session, t, at_once) for i, t in zip(misses, threads)]
    bar = DecodeBar([sizes[i] for i in misses], len(files), opts.progress_bar)
    miss_set = set(misses)

    def done(i: int, _r) -> None:
        bar.file_done(i in miss_set)
        if opts.progress:
            opts.progress(bar.files, len(files), files[i].path)

    def task_done(k: int, r) -> None:
        done(misses[k], r)

    for i, d in enumerate(decoded):
        if d is not None:
            done(i, d)
    try:
        fn = functools.partial(_load_file, on_bytes=bar.bytes_read) if procs <= 1 and bar.shown else _load_file
        for i, d in zip(misses, run_map_retrying(fn, tasks, procs, task_done, executor=opts.executor)):
            decoded[i] = _lost(files[i].path, d) if isinstance(d, TaskFailed) else d
        for i, d in enumerate(decoded):
            if isinstance(d, _Failed):
                continue
            try:
                decoded[i] = _map(d, session)
            except (OSError, ValueError):  # its entry or work folder went meanwhile (a concurrent clear): again
                again = _load_file(LoadTask(files[i].path, CacheSession(None, session.all_args)))
                decoded[i] = _map(again, session) if isinstance(again, Decoded) else again
    except BaseException:
        for d in decoded:  # nothing decoded for this load outlives it
            _discard(d)
        raise
    finally:
        bar.close()
    return decoded


def _job_of(path, found, decoded: list) -> Job:
    """The job from the decoded files: one string table, each rank's tables renumbered into it, findings of
    discovery, unreadable files, decoding and validation."""
    files = found.files
    explicit = isinstance(path, (list, tuple)) or not Path(path).is_dir()
    findings = list(found.findings)
    skipped = list(found.skipped)
    failed = [(f, d) for f, d in zip(files, decoded) if isinstance(d, _Failed)]
    if failed and (explicit or len(failed) == len(files)):
        raise failed[0][1].error()
    for f, d in failed:  # a file of a folder that cannot be read at all: the others load, loudly
        skipped.append((f.path, d.problem))
        findings.append(
            Finding.of(
                FindingCode.SKIPPED_FILE,
                f"not loaded, rank {f.rank} is missing from every number: {d.problem}"
                + (f" ({d.fix})" if d.fix else ""),
                rank=f.rank,
                file=f.path,
            )
        )
    strings = StringTable()
    traces: dict[int, RankTrace] = {}
    checked = {}
    for f, d in zip(files, decoded):
        if isinstance(d, _Failed):
            continue
        traces[f.rank] = _rank_trace(f, d, strings)
        checked[f.rank] = d.checks
        findings.extend(findings_from_problems(d.problems, f.rank, f.path))
    _check_some_events(path, traces, findings)
    job = Job(traces=traces, strings=strings, findings=findings, skipped=skipped, path=str(path))
    job.findings.extend(validate_job(job, checked))
    return job


def _rank_trace(f, d: DecodedFile, strings: StringTable) -> RankTrace:
    """One rank's trace, its string ids renumbered into the job's ``strings``."""
    remap = strings.merge(d.strings)
    moved = remap != np.arange(len(remap))  # the first file's ids (or a file like it) are the job's ids
    tables = {t: dict(getattr(d, t)) for t in ID_COLUMNS}
    if moved.any():
        try:
            _renumber(tables, remap, len(strings), _holding_moved(tables, moved, d.ids_used))
        except SpillError as e:
            raise _no_room(e, f.path) from None
    t = RankTrace(
        f.rank,
        f.path,
        dict(d.meta),
        tables["events"],
        {k: tables[k] for k in ("instants", "counters", "flows", "names")},
        strings,
        ts_is_float=d.ts_is_float,
        n_trace_events=d.n_trace_events,
        phase_counts=d.phase_counts,
        raw_args=d.raw_args,
        format=d.format,
    )
    t.derived_store = EntryStore.of(d.packed, t.n_events)  # (columns mapped from a cache entry: kept beside it)
    t.release_pages()  # what renumbering and deriving read is paged in again when used
    return t


def _check_some_events(path, traces: dict, findings: list) -> None:
    """A job whose every rank has no event with a duration is an error, naming why."""
    if not traces or any(t.n_events for t in traces.values()):
        return
    names = ", ".join(Path(t.file).name for t in traces.values())
    where = str(path) if not isinstance(path, (list, tuple)) else None
    dropped = [x for x in findings if x.code in _DROP_CODES]
    if dropped:
        raise TraceEventError(
            f"no usable events with a duration in {names}: {sum(x.count for x in dropped)} left out "
            f"({dropped[0].code.value}: {dropped[0].message}{' e.g. ' + dropped[0].example if dropped[0].example else ''})",
            path=where,
            fix="the file is damaged; re-export the trace",
        )
    raise TraceFormatError(
        f"no events with a duration in {names} (metadata only?)",
        path=where,
        fix="pass a trace recorded while the profiler was active",
    )


def _lost(path: str, r: TaskFailed) -> _Failed:
    """A file whose worker was lost at every try (killed by a signal, or out of memory): not the file's fault."""
    return _Failed(
        WorkerLostError(
            r.message,
            path=path,
            fix="run again with fewer --workers (workers= in the API), or with more memory",
        )
    )


def _discard(d) -> None:
    """Remove the work folder of a decoded file that will not be mapped (the load failed meanwhile)."""
    if isinstance(d, Decoded):
        shutil.rmtree(d.work.path, ignore_errors=True)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
