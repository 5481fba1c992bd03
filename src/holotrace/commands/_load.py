"""Options shared by every command that loads a job, and the load itself."""

from __future__ import annotations

import argparse

from holotrace.loader import LoadOptions, load_with
from holotrace.model.job import Job


def add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        help="folder of per-rank trace files, one trace file (.json or .json.gz), or a folder written by "
        "'holotrace ingest'",
    )
    g = p.add_argument_group("loading")
    g.add_argument(
        "--strict",
        action="store_true",
        help="fail on missing/duplicated/mixed ranks or damaged files instead of reporting them",
    )
    g.add_argument("--no-cache", action="store_true", help="decode the files again; neither read nor write the cache")
    g.add_argument(
        "--cache-dir", metavar="DIR", help="cache folder (default: $HOLOTRACE_CACHE_DIR or ~/.cache/holotrace)"
    )
    g.add_argument(
        "--workers", type=int, metavar="N", help="cores used to decode (default: all, bounded by the files and memory)"
    )
    g.add_argument(
        "--quiet", action="store_true", help="no progress bar on stderr (shown on a terminal for loads over a second)"
    )
    g.add_argument("--debug", action="store_true", help="show tracebacks")
    add_rules_option(g)
    add_executor_options(g)
    f = p.add_argument_group("selection")
    f.add_argument("--ranks", metavar="LIST", help="analyse only these ranks, e.g. 0-3,7 (default: all)")
    f.add_argument("--steps", metavar="LIST", help="analyse only these ProfilerStep numbers, e.g. 5-9 (default: all)")


def add_rules_option(g) -> None:
    """``--rules FILE`` (repeatable): a user's classification rules, tried before the built-in table."""
    g.add_argument(
        "--rules",
        metavar="FILE",
        action="append",
        default=None,
        help="classification rules tried before the built-in table (repeatable; default: the files in "
        "$HOLOTRACE_RULES; format: docs/rules.md)",
    )


def add_executor_options(g) -> None:
    """``--executor`` and ``--ray-address`` (where per-file and per-rank work runs)."""
    g.add_argument(
        "--executor",
        choices=("local", "ray"),
        default=None,
        help="where per-file work runs: local processes or a Ray cluster (default: $HOLOTRACE_EXECUTOR, else local)",
    )
    g.add_argument(
        "--ray-address",
        metavar="auto|HOST:PORT",
        default=None,
        help="the Ray cluster to join (default: $HOLOTRACE_RAY_ADDRESS, else a Ray instance on this machine)",
    )


def executor_of(args: argparse.Namespace):
    """The executor the options (or the environment) name; None when it is the local pool."""
    import os

    from holotrace.exec.executor import ENV_EXECUTOR, get_executor

    name = getattr(args, "executor", None) or os.environ.get(ENV_EXECUTOR) or "local"
    if name.strip().lower() == "local":
        return None
    return get_executor(name, address=getattr(args, "ray_address", None), workers=getattr(args, "workers", None))


def load_path(path, opts: LoadOptions | None = None, **options) -> Job:
    """The one resolver of a command's PATH: a folder written by ``holotrace ingest`` is read back as the job it
    holds; anything else (a trace folder, a file, a list of files) is loaded with ``opts``
    (:func:`holotrace.loader.load_with`)."""
    from holotrace.scale.store import is_ingest_folder

    opts = opts if opts is not None else LoadOptions(**options)
    if isinstance(path, (list, tuple)) or not is_ingest_folder(path):
        return load_with(path, opts)
    from holotrace.scale.ingested import load_ingested

    if opts.all_args:
        from holotrace.errors import AnalysisError

        source = _ingested_from(path)
        raise AnalysisError(
            "an ingest folder does not keep every event's raw args, which this command reads",
            path=path,
            fix="run it on the trace folder the folder was ingested from" + (f", {source}" if source else ""),
        )
    job = load_ingested(path)
    if opts.strict:
        from holotrace.errors import JobConsistencyError

        serious = [x for x in job.findings if x.severity == "error"]
        if serious:
            raise JobConsistencyError(
                serious[0].message,
                path=serious[0].file or path,
                fix="read without --strict to get the valid part and every finding",
            )
    return job


def _ingested_from(folder) -> str | None:
    """The trace folder an ingest folder was made from, as its manifests record it (None: unknown, or several)."""
    from holotrace.errors import HolotraceError
    from holotrace.scale.store import read_folder

    try:
        sources = {m.get("path") for m in read_folder(folder)[0]}
    except HolotraceError:
        return None
    return sources.pop() if len(sources) == 1 and None not in sources else None


def load_job(args: argparse.Namespace) -> Job:
    ex = executor_of(args)  # None: this machine's process pool

    def opts(executor=None) -> LoadOptions:
        return LoadOptions(
            strict=args.strict,
            cache=not args.no_cache,
            cache_dir=args.cache_dir,
            workers=args.workers,
            executor=executor,
            progress_bar=False if getattr(args, "quiet", False) else None,
            rules=getattr(args, "rules", None),
        )

    if ex is None:
        return select_job(load_path(args.path, opts()), args)
    with ex:
        job = load_path(args.path, opts(ex))
    return select_job(job, args)


def select_job(job: Job, args: argparse.Namespace) -> Job:
    """The job restricted to ``--ranks`` / ``--steps`` (the job itself when neither is given)."""
    from holotrace.model.filter import TraceFilter, filter_job, parse_int_ranges

    ranks, steps = getattr(args, "ranks", None), getattr(args, "steps", None)
    if ranks is None and steps is None:
        return job
    flt = TraceFilter(
        ranks=parse_int_ranges(ranks, "rank") if ranks is not None else None,
        steps=parse_int_ranges(steps, "step") if steps is not None else None,
    )
    out = filter_job(job, flt)
    if not any(out.rank(r).n_events for r in out.ranks):
        from holotrace.analysis.steps import profiler_steps
        from holotrace.errors import AnalysisError

        asked = " ".join(f"--{k} {x}" for k, x in (("ranks", ranks), ("steps", steps)) if x is not None)
        raise AnalysisError(
            f"{asked} selects no events",
            path=job.path,
            fix=f"the job has ranks {job.ranks} and steps {profiler_steps(job)}",
        )
    return out


def add_replay_option(p: argparse.ArgumentParser) -> None:
    """``--replay auto|graph|segments``: which replay of the job answers (docs/analyses.md, the scale-out replay)."""
    p.add_argument(
        "--replay",
        choices=("auto", "graph", "segments"),
        default=None,
        help="the job graph of every rank in one process, or the scale-out replay at collective granularity "
        "mapped over the ranks (default: $HOLOTRACE_REPLAY, else auto: the graph up to 64 ranks)",
    )


def trace_ranks(args: argparse.Namespace) -> tuple[str | None, list[int]]:
    """The trace files' folder (an ingest folder: the one it was made from; None when unknown) and the ranks
    ``--ranks`` selects of it, read from the files' heads only."""
    from holotrace.ingest.discover import discover
    from holotrace.model.filter import parse_int_ranges
    from holotrace.scale.store import is_ingest_folder

    path = args.path
    if not isinstance(path, (list, tuple)) and is_ingest_folder(path):
        path = _ingested_from(path)
        if path is None:
            return None, []
    ranks = sorted(f.rank for f in discover(path).files)
    if getattr(args, "ranks", None) is not None:
        want = set(parse_int_ranges(args.ranks, "rank"))
        ranks = [r for r in ranks if r in want]
    return path, ranks


def replay_of(args: argparse.Namespace, n_ranks: int) -> str:
    """``"graph"`` or ``"segments"``: the replay ``--replay`` (or the number of ranks) asks for."""
    from holotrace.scale.replay_choice import choose_replay

    return choose_replay(n_ranks, getattr(args, "replay", None))


def segment_advice_of(args: argparse.Namespace, path, files: list[int], **kw):
    """The scale-out replay's advice (``kw``: as ``job_advice``) of the rank files ``files`` of ``path``, mapped on
    the executor the options name."""
    from holotrace.errors import AnalysisError
    from holotrace.scale.segment_run import segment_advice

    if getattr(args, "steps", None) is not None:
        raise AnalysisError(
            "--steps cannot be combined with the scale-out replay (it maps whole rank files)",
            path=args.path,
            fix="drop --steps (advise: use --step), or pass --replay graph",
        )
    opts = dict(
        files_ranks=files,
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        rules=getattr(args, "rules", None),
    )
    ex = executor_of(args)
    if ex is None:
        return segment_advice(path, **opts, **kw)
    with ex:
        return segment_advice(path, executor=ex, **opts, **kw)
