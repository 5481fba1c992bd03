"""``holotrace cache [status|clear|dir]``: show, locate or clear the cache of decoded files."""

from __future__ import annotations

import argparse

from holotrace.commands.base import Command
from holotrace.ingest import cache


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        nargs="?",
        choices=("status", "clear", "dir"),
        default="status",
        help="status (default): where the cache is, its entries and size; dir: print the folder; clear: remove the entries",
    )
    p.add_argument(
        "--cache-dir", metavar="DIR", help="cache folder (default: $HOLOTRACE_CACHE_DIR or ~/.cache/holotrace)"
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args: argparse.Namespace) -> int:
    d = cache.resolve_dir(args.cache_dir)
    if args.action == "dir":
        print(d)
        return 0
    if args.action == "status":
        s = cache.status(d)
        if not s["exists"]:
            print(f"cache folder {d} (not created yet: empty)")
            return 0
        extra = [f"{s['with_raw_args']} keeping raw args"] if s["with_raw_args"] else []
        extra += [f"{s['work']} being written or left by a killed run"] if s["work"] else []
        extra += [f"{s['other']} other item(s), not cache entries"] if s["other"] else []
        print(f"cache folder {d}")
        print(
            f"  {s['entries']} cached trace(s), {s['bytes'] / 1e6:.1f} MB" + (f" ({'; '.join(extra)})" if extra else "")
        )
        print("  'holotrace cache clear' removes them")
        return 0
    done = cache.clear(d)
    n, size = done
    other = f"; left {done.left} item(s) that are not cache entries" if done.left else ""
    print(f"removed {n} cached trace(s), {size / 1e6:.1f} MB, from {d}{other}")
    return 0


COMMAND = Command(
    name="cache",
    help="show (the default), locate or clear the cache of decoded traces",
    description="Decoded traces are cached as the column files a load maps (keyed by path and format version, "
    "served only while the file's device, inode, size, modification and change times and first and last "
    "64 KiB are unchanged; 'holotrace doctor --verify' checks the whole content; about 130 bytes per event) so that a "
    "second load is fast; one entry per trace file (raw args, when a command asked for them, kept in it, "
    "compressed). With no action: the folder, its entries and their size. 'dir' prints "
    "the folder; 'clear' removes the cache's entries and nothing else, and refuses a folder that "
    "is not a holotrace cache.",
    add_arguments=add_arguments,
    run=run,
)
