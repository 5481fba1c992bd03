"""``holotrace doctor PATH``: every finding, with its evidence."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from holotrace.commands._load import add_load_options, load_job
from holotrace.commands.base import Command
from holotrace.text import sanitize


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument(
        "--verify",
        action="store_true",
        help="also read every trace file in full and check its cache entry against the whole content "
        "(a stale entry is removed and the file decoded again)",
    )


def _verify(args: argparse.Namespace) -> dict:
    """``{"ok": n, "stale": [files], "absent": n, "derived_removed": n}`` of the job's cache entries checked against
    the files' content (and their derived files against their own CRC-32s)."""
    from holotrace.ingest import cache
    from holotrace.ingest.derived import verify_entry
    from holotrace.ingest.discover import discover
    from holotrace.loader import CACHE_TAG

    out = {"ok": 0, "stale": [], "absent": 0, "derived_removed": 0}
    from holotrace.scale.store import is_ingest_folder

    if args.no_cache or is_ingest_folder(args.path):
        return out
    cdir = cache.resolve_dir(args.cache_dir)
    for f in discover(args.path).files:
        status = cache.verify(f.path, cdir, False, CACHE_TAG)
        if status == "ok":  # (the columns derived from it too: a damaged one is removed, made again when needed)
            out["derived_removed"] += verify_entry(cdir / cache.key_for(f.path, False, CACHE_TAG))
        if status == "stale":
            out["stale"].append(f.path)
        else:
            out[status] += 1
    return out


def run(args: argparse.Namespace) -> int:
    verified = _verify(args) if args.verify else None
    job = load_job(args)
    errors = [f for f in job.findings if f.severity == "error"]
    if args.json:
        extra = {"cache_verified": verified} if verified is not None else {}
        print(
            json.dumps(
                {
                    **extra,
                    "ok": not errors,
                    "ranks": job.ranks,
                    "skipped_files": [{"file": f, "reason": w} for f, w in job.skipped],
                    "findings": [f.as_dict() for f in job.findings],
                },
                indent=2,
                default=str,
            )
        )
        return 1 if errors else 0
    print(sanitize(f"{job.path}: {len(job.ranks)} rank(s) loaded"))
    if verified is not None:
        print(
            f"cache checked against each file's whole content: {verified['ok']} ok, "
            f"{len(verified['stale'])} stale (removed; decoded again), {verified['absent']} not cached"
            + (
                f"; {verified['derived_removed']} damaged derived file(s) removed (made again when needed)"
                if verified["derived_removed"]
                else ""
            )
        )
        for f in verified["stale"]:
            print(sanitize(f"        stale: {f}"))
    order = {"error": 0, "warning": 1, "info": 2}
    for f in sorted(job.findings, key=lambda f: (order.get(f.severity, 3), f.rank if f.rank is not None else -1)):
        where = []
        if f.rank is not None:
            where.append(f"rank {f.rank}")
        if f.file:
            where.append(Path(f.file).name)
        loc = f" ({', '.join(where)})" if where else ""
        print(sanitize(f"{f.severity.upper():7} {f.code.value}{loc}: {f.message}"))
        if f.example:
            print(sanitize(f"        example: {f.example}"))
    if not job.findings:
        print("no findings: the job looks consistent")
    print(
        f"{'FAIL' if errors else 'OK'}: {len(errors)} error(s), "
        f"{sum(1 for f in job.findings if f.severity == 'warning')} warning(s), "
        f"{sum(1 for f in job.findings if f.severity == 'info')} note(s)"
    )
    return 1 if errors else 0


COMMAND = Command(
    name="doctor",
    help="check a job: missing/duplicate ranks, damaged files, clock skew, ...",
    description="Validate a job and list every finding with its evidence: missing or duplicated "
    "ranks, files from different jobs, damaged or truncated files, impossible durations, "
    "overlapping kernels on one stream, unlinked launches, clock skew. Exits 1 when an "
    "error was found (use it as a CI gate), 0 otherwise.",
    add_arguments=add_arguments,
    run=run,
)
