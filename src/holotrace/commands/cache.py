"""``holotrace cache clear|dir``: manage the cache of decoded files."""

from __future__ import annotations

import argparse
from holotrace.commands.base import Command
from holotrace.ingest import cache


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("clear", "dir"))
    p.add_argument("--cache-dir", metavar="DIR", help="cache folder (default: $HOLOTRACE_CACHE_DIR or ~/.cache/holotrace)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args: argparse.Namespace) -> int:
    d = cache.resolve_dir(args.cache_dir)
    if args.action == "dir":
        print(d)
        return 0
    done = cache.clear(d)
    n, size = done
    other = f"; left {done.left} item(s) that are not cache entries" if done.left else ""
    print(f"removed {n} cached trace(s), {size / 1e6:.1f} MB, from {d}{other}")
    return 0


COMMAND = Command(
    name="cache",
    help="show or clear the cache of decoded traces",
    description="Decoded traces are cached as the column files a load maps (keyed by path and format version, "
                "served only while the file's device, inode, size, modification and change times and first and last "
                "64 KiB are unchanged; 'holotrace doctor --verify' checks the whole content; about 130 bytes per event) so that a "
                "second load is fast. 'dir' prints "
                "the folder; 'clear' removes the cache's entries and nothing else, and refuses a folder that "
                "is not a holotrace cache.",
    add_arguments=add_arguments,
    run=run,
)
