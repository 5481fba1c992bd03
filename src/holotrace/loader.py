"""``holotrace.load``: from a folder of trace files to a validated ``Job``."""

from __future__ import annotations

import gc
import logging
import os
import time
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import numpy as np

from holotrace.errors import JobConsistencyError, TraceEventError, TraceFormatError
from holotrace.exec.pool import cpu_count, default_workers, run_map
from holotrace.ingest import cache as cache_mod
from holotrace.ingest.decode import DecodedFile, compact_ints, decode_file
from holotrace.ingest.discover import discover
from holotrace.findings import FindingCode
from holotrace.schema import ID_COLUMNS
from holotrace.model.classify import RULES_VERSION
from holotrace.model.job import Job, RankTrace, derive_columns
from holotrace.model.strings import StringTable
from holotrace.model.validate import findings_from_problems, validate_job

log = logging.getLogger("holotrace")


PathLike = Union[str, Path]
CACHE_TAG = f"rules{RULES_VERSION}"  # cached entries hold derived columns: the rule table's version keys them
PIECE_PARALLEL_MIN_BYTES = 48 * 2**20  # smaller files decode faster in one process
_EVENT_CODES = frozenset({FindingCode.MISSING_TIME, FindingCode.NEGATIVE_DURATION})  # strict: TraceEventError


def _load_file(task: tuple) -> DecodedFile:
    """Worker: one file to derived columns, through the cache."""
    path, use_cache, cache_dir, all_args, piece_workers, in_parent = task
    if use_cache:
        hit = cache_mod.load(path, cache_dir, all_args, CACHE_TAG)
        if hit is not None:
            hit.meta["_holotrace_cached"] = True
            return hit
    gc_was = gc.isenabled()
    gc.disable()  # no cycles are created while decoding; the collector only costs time
    try:
        d = decode_file(path, all_args=all_args, workers=piece_workers)
        derived = derive_columns(d.events, d.strings)
        d.events.update({k: (v if k == "end_ns" else compact_ints(v)) for k, v in derived.items()})
    finally:
        if gc_was:
            gc.enable()
    if use_cache:
        if in_parent:
            cache_mod.store_in_background(d, cache_dir, all_args, CACHE_TAG)
        else:
            cache_mod.store(d, cache_dir, all_args, CACHE_TAG)
    return d


def load(path: Union[PathLike, Sequence[PathLike]], *, strict: bool = False, cache: bool = True,
         cache_dir: Optional[PathLike] = None, workers: Optional[int] = None, all_args: bool = False,
         progress: Optional[Callable[[int, int, str], None]] = None) -> Job:
    """Load a job: a folder of per-rank trace files, one file, or a list of files.

    Parameters
    ----------
    path: folder, file, or list of files (plain or gzipped Kineto JSON; names do not matter).
    strict: raise :class:`~holotrace.errors.JobConsistencyError` on missing, duplicated or mixed ranks
        and on damaged files, instead of reporting them as findings.
    cache: reuse/write decoded tables in the on-disk cache (``cache_dir``, default the user's cache dir).
    workers: processes used to decode files (default: cores, bounded by memory).
    all_args: also keep every event's raw ``args`` text (``RankTrace.raw_args``).
    progress: called as ``progress(done, total, file)`` after each file.

    Returns a :class:`~holotrace.model.job.Job`; everything doubtful is in ``job.findings``.
    """
    found = discover(path, strict=strict)
    cdir = Path(cache_dir) if cache_dir is not None else cache_mod.default_cache_dir()
    files = found.files
    sizes = [_size(f.path) for f in files]
    n_workers = workers if workers is not None else default_workers(sizes)
    cores = cpu_count()
    # fewer (big) files than cores: decode each file's pieces in parallel instead
    piece_workers = 1
    if len(files) < cores and (workers is None or workers > 1):
        piece_workers = min(cores, workers or cores)
        n_workers = 1
    in_parent = n_workers <= 1 or len(files) <= 1
    tasks = [(f.path, cache, cdir, all_args, piece_workers if s > PIECE_PARALLEL_MIN_BYTES else 1, in_parent)
             for f, s in zip(files, sizes)]
    t0 = time.perf_counter()

    def done(i: int, _r) -> None:
        if progress:
            progress(i + 1, len(files), files[i].path)

    # cache hits are read here (a worker would only add a copy); misses are decoded by the pool
    decoded: list = [cache_mod.load(f.path, cdir, all_args, CACHE_TAG) if cache else None for f in files]
    misses = [i for i, d in enumerate(decoded) if d is None]
    for i, d in enumerate(decoded):
        if d is not None:
            done(i, d)
    for i, d in zip(misses, run_map(_load_file, [tasks[i] for i in misses], n_workers if len(misses) > 1 else 1,
                                    lambda k, r: done(misses[k], r))):
        decoded[i] = d
    strings = StringTable()
    traces: dict[int, RankTrace] = {}
    findings = list(found.findings)
    for f, d in zip(files, decoded):
        first = len(strings) == 0
        remap = strings.merge(d.strings)
        tables = {}
        for tname, id_cols in ID_COLUMNS.items():
            cols = dict(getattr(d, tname))
            for col in id_cols if not first else ():  # the first file's ids are the job's ids
                if col in cols:
                    v = cols[col]
                    cols[col] = np.where(v >= 0, remap[np.clip(v, 0, None)], -1).astype(np.int32) if len(remap) else v
            tables[tname] = cols
        meta = dict(d.meta)
        meta.pop("_holotrace_cached", None)
        findings.extend(findings_from_problems(d.problems, f.rank, f.path))
        traces[f.rank] = RankTrace(f.rank, f.path, meta, tables["events"], {k: tables[k] for k in ("instants", "counters", "flows", "names")},
                                   strings, ts_is_float=d.ts_is_float, n_trace_events=d.n_trace_events, phase_counts=d.phase_counts,
                                   raw_args=d.raw_args, format=d.format)
    if traces and all(t.n_events == 0 for t in traces.values()):
        names = ", ".join(Path(t.file).name for t in traces.values())
        raise TraceFormatError(f"no events with a duration in {names} (metadata only?)", path=str(path) if not isinstance(path, (list, tuple)) else None,
                               fix="pass a trace recorded while the profiler was active")
    job = Job(traces=traces, strings=strings, findings=findings, skipped=list(found.skipped), path=str(path))
    job.findings.extend(validate_job(job))
    log.info("loaded %d rank(s) in %.2f s", len(traces), time.perf_counter() - t0)
    if strict:
        serious = [x for x in job.findings if x.severity == "error"]
        if serious:
            cls = TraceEventError if serious[0].code in _EVENT_CODES else JobConsistencyError
            raise cls(serious[0].message, path=serious[0].file, fix="load without strict to get the valid part and every finding")
    return job


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
