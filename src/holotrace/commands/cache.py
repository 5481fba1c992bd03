"""``holotrace cache clear|dir``: manage the cache of decoded files."""

from __future__ import annotations

import argparse
from pathlib import Path

from holotrace.commands.base import Command
from holotrace.ingest import cache


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("clear", "dir"))
    p.add_argument("--cache-dir", metavar="DIR", help="cache folder (default: $HOLOTRACE_CACHE_DIR or ~/.cache/holotrace)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args: argparse.Namespace) -> int:
    d = Path(args.cache_dir) if args.cache_dir else cache.default_cache_dir()
    if args.action == "dir":
        print(d)
        return 0
    n, size = cache.clear(d)
    print(f"removed {n} cached trace(s), {size / 1e6:.1f} MB, from {d}")
    return 0


COMMAND = Command(
    name="cache",
    help="show or clear the cache of decoded traces",
    description="Decoded traces are cached as Arrow IPC files (keyed by path, size, mtime and format "
                "version) so that a second load is fast. 'dir' prints the folder, 'clear' empties it.",
    add_arguments=add_arguments,
    run=run,
)
