"""Options shared by every command that loads a job, and the load itself."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Optional

from holotrace.loader import load
from holotrace.model.job import Job


def add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="folder of per-rank trace files, or one trace file (.json or .json.gz)")
    g = p.add_argument_group("loading")
    g.add_argument("--strict", action="store_true", help="fail on missing/duplicated/mixed ranks or damaged files instead of reporting them")
    g.add_argument("--no-cache", action="store_true", help="decode the files again; neither read nor write the cache")
    g.add_argument("--cache-dir", metavar="DIR", help="cache folder (default: $HOLOTRACE_CACHE_DIR or ~/.cache/holotrace)")
    g.add_argument("--workers", type=int, metavar="N", help="processes decoding files (default: cores, bounded by memory)")
    g.add_argument("--quiet", action="store_true", help="no progress bar on stderr (shown on a terminal for loads over a second)")
    g.add_argument("--debug", action="store_true", help="show tracebacks")


class Progress:
    """A one-line progress display on stderr, shown only for loads longer than a second on a terminal."""

    def __init__(self, label: str, enabled: Optional[bool] = None):
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.done = 0
        self.total = 0
        self.t0 = time.monotonic()
        self._shown = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        if self.enabled:
            self._thread.start()

    def update(self, done: int, total: int, file: str) -> None:
        self.done, self.total = done, total

    def _loop(self) -> None:
        spin = "|/-\\"
        i = 0
        while not self._stop.wait(0.2):
            if time.monotonic() - self.t0 < 1.0:
                continue
            files = f" {self.done}/{self.total} files" if self.total else ""
            sys.stderr.write(f"\r{self.label}{files} {spin[i % 4]} {time.monotonic() - self.t0:.0f}s ")
            sys.stderr.flush()
            self._shown = True
            i += 1

    def close(self) -> None:
        self._stop.set()
        if self._shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def load_job(args: argparse.Namespace) -> Job:
    return load(args.path, strict=args.strict, cache=not args.no_cache, cache_dir=args.cache_dir, workers=args.workers,
                progress_bar=False if getattr(args, "quiet", False) else None)
