"""Options shared by every command that loads a job, and the load itself."""

from __future__ import annotations

import argparse

from holotrace.loader import load
from holotrace.model.job import Job


def add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="folder of per-rank trace files, or one trace file (.json or .json.gz)")
    g = p.add_argument_group("loading")
    g.add_argument("--strict", action="store_true", help="fail on missing/duplicated/mixed ranks or damaged files instead of reporting them")
    g.add_argument("--no-cache", action="store_true", help="decode the files again; neither read nor write the cache")
    g.add_argument("--cache-dir", metavar="DIR", help="cache folder (default: $HOLOTRACE_CACHE_DIR or ~/.cache/holotrace)")
    g.add_argument("--workers", type=int, metavar="N", help="cores used to decode (default: all, bounded by the files and memory)")
    g.add_argument("--quiet", action="store_true", help="no progress bar on stderr (shown on a terminal for loads over a second)")
    g.add_argument("--debug", action="store_true", help="show tracebacks")


def load_job(args: argparse.Namespace) -> Job:
    return load(args.path, strict=args.strict, cache=not args.no_cache, cache_dir=args.cache_dir, workers=args.workers,
                progress_bar=False if getattr(args, "quiet", False) else None)
