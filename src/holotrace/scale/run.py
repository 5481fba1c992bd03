"""A job as a map over ranks and a reduce over their summaries, on any executor.

:func:`summarize` finds the job's files (in this process: file heads only), maps :func:`summarize_file` over
them on an executor (the local process pool, or Ray), and folds each returned summary into a
:class:`holotrace.analysis.reduce.Reducer` as it arrives, keeping only the rank's facts (``info``). Each task
reads one file (through the cache when asked), runs the analyses on that rank and returns its
:class:`~holotrace.analysis.rank_summary.RankSummary`: no event table ever comes back, and the driver holds
no summary longer than it takes to fold it in. :func:`ingest` does the same and writes each rank's tables and summary to a
folder; :func:`read_ingest` reduces what a folder holds, naming the ranks it lacks. A file that cannot be read
becomes a finding; the other ranks complete.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from holotrace.analysis.job_summary import JobSummary
from holotrace.analysis.rank_summary import RankSummary, rank_summary
from holotrace.analysis.reduce import Reducer
from holotrace.atomic import kill_point, sweep
from holotrace.errors import HolotraceError, OutputError, TraceFormatError
from holotrace.exec.executor import Executor, LocalExecutor, TaskFailed
from holotrace.exec.retry import map_retrying
from holotrace.findings import Finding, FindingCode, rank_ranges
from holotrace.ingest.cache import fingerprint
from holotrace.ingest.discover import discover
from holotrace.loader import load
from holotrace.model.job import Job
from holotrace.model.rule_table import resolve_table
from holotrace.model.validate import RankFacts, check_rank, check_ranks
from holotrace.scale import store

__all__ = ["JobSummary", "RankTask", "summarize", "summarize_file", "ingest", "read_ingest"]

# codes found on the whole set of files or the whole job (the driver's), not on one file
_JOB_CODES = frozenset(
    {
        FindingCode.SKIPPED_FILE,
        FindingCode.RANK_ASSIGNED,
        FindingCode.DUPLICATE_RANK,
        FindingCode.BAD_RANK_INFO,
        FindingCode.MIXED_JOBS,
        FindingCode.MISSING_RANKS,
        FindingCode.RANK_OUT_OF_RANGE,
        FindingCode.NO_PROFILER_STEPS,
        FindingCode.STEPS_MISSING_ON_RANKS,
        FindingCode.CLOCK_SKEW,
    }
)


@dataclass(frozen=True)
class _Failed:
    rank: int
    file: str
    problem: str


@dataclass(frozen=True)
class RankTask:
    """One rank's file for a worker: read it (through the cache at ``cache_dir`` when ``cache``), summarise it,
    and write its tables and summary under ``output`` when given (an ingest)."""

    path: str
    rank: int  # the rank the job's discovery gave this file
    cache: bool = False
    cache_dir: Optional[str] = None
    output: Optional[str] = None
    rules: tuple = ()  # users' rules files (every worker must reach them); (): $HOLOTRACE_RULES


def summarize_file(task: RankTask):
    """Task: one file → its rank's summary (model facts and findings in ``info``); a :class:`_Failed` when the
    file cannot be read."""
    path, rank, out = task.path, task.rank, task.output
    source = fingerprint(path) if out is not None else None  # the file as it is read: its rank folder records it
    kill_point(f"task-{rank}")
    t0 = time.perf_counter()
    one = load_rank(task)
    if isinstance(one, _Failed):
        if out is not None:
            store.write_failure(Path(out), rank, path, one.problem)
        return one
    one, job = one
    t = job.rank(rank)
    checks = check_rank(job, t)
    decode = [f for f in one.findings if f.code not in _JOB_CODES and f not in checks]
    s = rank_summary(job, rank)
    s.info.update(
        {
            "file": path,
            "n_events": int(t.n_events),
            "has_steps": bool(t.has_steps),
            "meta_world_size": _world(t.meta),
            "findings_decode": [dataclasses.replace(f, rank=rank).as_dict() for f in decode],
            "findings_check": [dataclasses.replace(f, rank=rank).as_dict() for f in checks],
        }
    )
    if out is not None:
        store.write_rank(Path(out), t, one.strings, s, source)
    else:
        s.info["summary_bytes"] = len(store.summary_to_bytes(s))
    s.info["map_seconds"] = round(time.perf_counter() - t0, 4)
    s.info["worker_peak_rss"] = _peak_rss()
    return s


def load_rank(task: RankTask):
    """``(the file as loaded, its one-rank job under the rank discovery gave)``, or a :class:`_Failed`."""
    try:
        one = load(
            task.path,
            cache=task.cache,
            cache_dir=task.cache_dir,
            workers=1,
            progress_bar=False,
            rules=list(task.rules) or None,
        )
    except OutputError:
        raise  # no room to write: not the file's fault, and the run stops (a TaskFailed of this kind)
    except HolotraceError as e:
        return _Failed(task.rank, task.path, e.problem + (f" ({e.fix})" if e.fix else ""))
    t = one.rank(one.ranks[0])
    t.rank = task.rank  # the rank the job's discovery gave this file
    job = Job(
        traces={task.rank: t}, strings=one.strings, findings=[], skipped=[], path=task.path, rule_table=one.rule_table
    )
    return one, job


def _peak_rss() -> Optional[int]:
    """This process's peak resident memory so far (bytes), where the platform tells."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except (ImportError, OSError):
        return None


def _world(meta: dict) -> Optional[int]:
    di = meta.get("distributedInfo")
    return di.get("world_size") if isinstance(di, dict) and isinstance(di.get("world_size"), int) else None


def _finding(d: dict) -> Finding:
    return Finding.of(
        d["code"],
        d["message"],
        d.get("rank"),
        d.get("file"),
        d.get("count", 1),
        d.get("example"),
        severity=d.get("severity"),
    )


def _select(files: list, ranks: Optional[Sequence[int]]) -> list:
    if ranks is None:
        return files
    want = {int(r) for r in ranks}
    return [f for f in files if f.rank in want]


def _light(s: RankSummary) -> RankSummary:
    """The summary without its frames (what the driver keeps of a rank once it is folded in)."""
    return RankSummary(s.rank, {}, s.info)


def _map(
    executor: Optional[Executor], tasks: list, progress_bar: Optional[bool], reducer: Optional[Reducer] = None
) -> list:
    """The tasks' results in order, each summary folded into ``reducer`` as it arrives and kept without its frames."""
    ex = executor or LocalExecutor()

    def keep(i: int, r):
        if not isinstance(r, RankSummary):
            return r
        if reducer is not None:
            reducer.add(r)
        return _light(r)

    bar = None
    if (progress_bar if progress_bar is not None else sys.stderr.isatty()) and tasks:
        from tqdm import tqdm

        bar = tqdm(
            total=len(tasks),
            unit="rank",
            desc=f"ranks ({ex.name})",
            file=sys.stderr,
            delay=1.0,
            leave=False,
            dynamic_ncols=True,
        )
    try:
        return map_retrying(
            ex, summarize_file, tasks, on_done=(lambda i, r: bar.update(1)) if bar is not None else None, keep=keep
        )
    finally:
        if bar is not None:
            bar.close()
        if executor is None:
            ex.close()


def _assemble(
    path: str,
    files: dict,
    results: list,
    found_findings: list,
    reducer: Reducer,
    *,
    top: int,
    world: Optional[int],
    executor: str,
    explicit: bool = False,
) -> JobSummary:
    """Findings in the loader's order (discovery, unreadable files, decoding, per-rank checks, job checks) and the
    reduce's frames. ``results``: per file, the rank's summary without frames (folded into ``reducer``) or its failure."""
    summaries = [r for r in results if isinstance(r, RankSummary)]
    findings = list(found_findings)
    failed = []
    for r, res in zip(files, results):
        if isinstance(res, _Failed):
            failed.append((r, res.file, res.problem))
        elif isinstance(res, TaskFailed):
            failed.append((r, files[r], f"the task failed: {res}"))
        elif isinstance(res, dict):  # a failure read back from an ingest folder
            failed.append((r, res["file"], res["problem"]))
    if failed and (explicit or not summaries):
        r, f, problem = failed[0]
        raise TraceFormatError(
            f"rank {r} could not be read: {problem}", path=f, fix="check the file (holotrace doctor PATH)"
        )
    for r, f, problem in failed:
        findings.append(
            Finding.of(
                FindingCode.SKIPPED_FILE,
                f"not loaded, rank {r} is missing from every number: {problem}",
                rank=r,
                file=f,
            )
        )
    summaries.sort(key=lambda s: s.rank)
    for key in ("findings_decode", "findings_check"):
        findings += [_finding(d) for s in summaries for d in s.info.get(key, [])]
    findings += check_ranks(
        [
            RankFacts(
                s.rank,
                s.info.get("n_events", 0),
                s.info.get("has_steps", False),
                (s.info.get("first_ns") or 0) - s.info.get("clock_offset_ns", 0),
                s.info.get("clock_offset_ns", 0),
            )
            for s in summaries
        ]
    )
    if world is None:
        world = next((s.info.get("meta_world_size") for s in summaries if s.info.get("meta_world_size")), None)
    frames = reducer.frames(top=top)
    sizes = [int(s.info.get("summary_bytes", 0)) for s in summaries]
    return JobSummary(path, [s.rank for s in summaries], frames, findings, world, sizes, executor)


def summarize(
    path,
    *,
    executor: Optional[Executor] = None,
    ranks: Optional[Sequence[int]] = None,
    cache: bool = False,
    cache_dir=None,
    top: int = 10,
    progress_bar: Optional[bool] = None,
    rules=None,
) -> JobSummary:
    """The job's summary by a map over its ranks on ``executor`` (default: the local pool) and a reduce.

    Args:
        path: folder of trace files, one file, or an ingest folder (then :func:`read_ingest`).
        executor: where the per-rank work runs (:func:`holotrace.exec.executor.get_executor`).
        ranks: only these ranks.
        cache: read/write each file's cache entry (on ``cache_dir``, which every worker must reach).
        rules: users' rules files (a path or a list; every worker must reach them), checked here first.
    """
    files_of_rules = _rules_files(rules)
    if not isinstance(path, (list, tuple)) and store.is_ingest_folder(path):
        return read_ingest(path, ranks=ranks, top=top)
    found = discover(path)
    files = _select(found.files, ranks)
    cdir = str(cache_dir) if cache_dir is not None else None
    tasks = [RankTask(f.path, f.rank, cache, cdir, rules=files_of_rules) for f in files]
    reducer = Reducer()
    results = _map(executor, tasks, progress_bar, reducer)
    explicit = isinstance(path, (list, tuple)) or not Path(path).is_dir()
    return _assemble(
        str(path),
        {f.rank: f.path for f in files},
        results,
        found.findings,
        reducer,
        top=top,
        world=_found_world(found),
        executor=(executor.name if executor else "local"),
        explicit=explicit,
    )


def _rules_files(rules) -> tuple:
    """Users' rules files as a tuple of paths, read and checked once here (a bad file is one error, not one per
    rank); () when none are given (workers then read ``$HOLOTRACE_RULES``)."""
    if rules is None:
        return ()
    files = (str(rules),) if isinstance(rules, (str, Path)) else tuple(str(f) for f in rules)
    resolve_table(files)
    return files


def _found_world(found) -> Optional[int]:
    ws = {t.dist.get("world_size") for t in found.files if type(t.dist.get("world_size")) is int}
    return ws.pop() if len(ws) == 1 else None


def ingest(
    path,
    output,
    *,
    executor: Optional[Executor] = None,
    ranks: Optional[Sequence[int]] = None,
    cache: bool = False,
    cache_dir=None,
    progress_bar: Optional[bool] = None,
    rules=None,
) -> dict:
    """Write each selected rank's tables and summary under ``output`` (see :mod:`holotrace.scale.store`).

    The run's manifest is written first (``"status": "running"``) and marked complete at the end, so a run that
    is killed leaves a folder that names what it lacks. Ranks whose folder was already written from the file as
    it is now are skipped: running the same command again does only what is missing.

    Returns ``{"ranks": written, "failed": [(rank, file, problem)], "kept": ranks already ingested}``.
    """
    files_of_rules = _rules_files(rules)
    out = Path(output)
    found = discover(path)
    files = _select(found.files, ranks)
    out.mkdir(parents=True, exist_ok=True)
    sweep(out)  # what killed runs of this machine left half-written
    t0 = time.perf_counter()
    sel = [f.rank for f in files]
    where = [str(Path(p).absolute()) for p in path] if isinstance(path, (list, tuple)) else str(Path(path).absolute())
    manifest = {
        "path": where,
        "world_size": _found_world(found),
        "job_ranks": [f.rank for f in found.files],
        "ranks": sel,
        "files": {str(f.rank): f.path for f in files},
        "status": "running",
        "findings": [x.as_dict() for x in found.findings],
        "executor": executor.name if executor else "local",
    }
    mpath = store.write_manifest(out, manifest, min(sel) if sel else 0, max(sel) if sel else 0)
    fresh = {f.rank for f in files if _ingested_from(store.rank_source(store.rank_dir(out, f.rank)), f.path)}
    todo = [f for f in files if f.rank not in fresh]
    kept = [f.rank for f in files if f.rank in fresh]
    tasks = [
        RankTask(f.path, f.rank, cache, str(cache_dir) if cache_dir else None, str(out), files_of_rules) for f in todo
    ]
    results = _map(executor, tasks, progress_bar)
    written = [r.rank for r in results if isinstance(r, RankSummary)]
    no_room = next((r for r in results if isinstance(r, TaskFailed) and r.kind in ("OutputError", "NoRoomError")), None)
    if no_room is not None:  # the folder cannot take the ranks (disk full, a limit): no file is to blame
        raise OutputError(no_room.message)
    failed = [
        (f.rank, f.path, r.problem if isinstance(r, _Failed) else str(r))
        for f, r in zip(todo, results)
        if not isinstance(r, RankSummary)
    ]
    for r, f, problem in failed:
        if isinstance(problem, str) and not store.rank_dir(out, r).is_dir():
            store.write_failure(out, r, f, problem)
    manifest.update(status="complete", seconds=round(time.perf_counter() - t0, 3), written=written, kept=kept)
    store.write_manifest(out, manifest, 0, 0, path=mpath)
    return {"ranks": written, "failed": failed, "kept": kept}


def missing_finding(manifests: list, folder, missing: list) -> Finding:
    """``incomplete_ingest`` when a run that stopped before it finished (or is still going) was to write some of
    ``missing``, else ``missing_ranks``: either names the ranks and the exact command that ingests them."""
    cmd = resume_command(manifests, folder, missing)
    unfinished = [
        m for m in manifests if m.get("status", "complete") != "complete" and set(m.get("ranks", ())) & set(missing)
    ]
    if unfinished:
        return Finding.of(
            FindingCode.INCOMPLETE_INGEST,
            f"an ingest run stopped before it finished (or is still running): {len(missing)} rank(s) have no "
            f"ingested summary: {rank_ranges(missing)}; resume with: {cmd}; cross-rank numbers cover only the "
            f"ingested ranks",
            count=len(missing),
        )
    return Finding.of(
        FindingCode.MISSING_RANKS,
        f"{len(missing)} rank(s) of the job have no ingested summary in this folder: {rank_ranges(missing)}; "
        f"ingest them with: {cmd}; cross-rank numbers cover only the ingested ranks",
        count=len(missing),
    )


def manifest_findings(manifests: list) -> list:
    """What discovery found, from the runs' manifests: every run discovered the same job, so each finding once."""
    seen, out = set(), []
    for m in manifests:
        for d in m.get("findings", []):
            key = (d["code"], d["message"])
            if key not in seen:
                seen.add(key)
                out.append(_finding(d))
    return out


def _ingested_from(source: Optional[dict], path: str) -> bool:
    """A rank folder written from ``path`` as the file is now."""
    return bool(source) and source == fingerprint(path)


def resume_command(manifests: list, folder, ranks: list) -> str:
    """The exact command that ingests ``ranks`` into ``folder`` (from the job the manifests name)."""
    import shlex

    src = next((m.get("path") for m in manifests if m.get("path")), "PATH")
    srcs = src if isinstance(src, list) else [src]
    return " ".join(
        [
            "holotrace",
            "ingest",
            *map(shlex.quote, map(str, srcs)),
            "--output",
            shlex.quote(str(folder)),
            "--ranks",
            rank_ranges(ranks).replace(" ", ""),
        ]
    )


def read_ingest(folder, *, ranks: Optional[Sequence[int]] = None, top: int = 10) -> JobSummary:
    """Reduce the summaries an ingest folder holds. Ranks of the job without a summary (never ingested, or
    ingested by a run still going) are a ``missing_ranks`` finding; ranks whose file failed, ``skipped_file``."""
    want = {int(r) for r in ranks} if ranks is not None else None
    manifests, summary_files, failures = store.read_folder(folder, want)
    job_ranks = sorted({int(r) for m in manifests for r in m.get("job_ranks", [])})
    if want is not None:
        job_ranks = [r for r in job_ranks if r in want]
    found_findings = manifest_findings(manifests)
    reducer, summaries = Reducer(), []
    for _rank, f in summary_files:  # one summary in memory at a time
        data = f.read_bytes()
        s = store.summary_from_bytes(data, str(f))
        s.info["summary_bytes"] = len(data)
        reducer.add(s)
        summaries.append(_light(s))
        del s, data
    have = {s.rank for s in summaries} | {int(f["rank"]) for f in failures}
    missing = [r for r in job_ranks if r not in have]
    if missing:
        found_findings.append(missing_finding(manifests, folder, missing))
    files = {s.rank: s.info.get("file", "") for s in summaries}
    files.update({int(f["rank"]): f["file"] for f in failures})
    order = sorted(files)
    by_rank = {s.rank: s for s in summaries}
    by_rank.update({int(f["rank"]): f for f in failures})
    results = [by_rank[r] for r in order]
    world = next((m.get("world_size") for m in manifests if m.get("world_size")), None)
    if not summaries and not failures:
        raise TraceFormatError(
            "the ingest folder holds no whole rank" + (f" of ranks {rank_ranges(sorted(want))}" if want else ""),
            path=str(folder),
            fix=(
                f"resume with: {resume_command(manifests, folder, missing)}"
                if missing
                else "run holotrace ingest PATH --output DIR"
            ),
        )
    return _assemble(
        str(folder),
        {r: files[r] for r in order},
        results,
        found_findings,
        reducer,
        top=top,
        world=world,
        executor="ingest",
    )
