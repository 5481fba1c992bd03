"""The ``holotrace`` command: parses arguments, calls the library, prints.

Every subcommand is a :class:`holotrace.commands.base.Command` listed in
:data:`holotrace.commands.COMMANDS`; the parser is built from that list, importing
only the command that runs (``--help`` and ``--version`` import no command, nor
numpy, pandas or pyarrow). Errors the user can fix print one line and exit
non-zero; ``--debug`` shows the traceback. Log messages go through one handler for the run
(``commands/_log.py``): each warning once, with its count; ``-v`` adds the informational ones,
``--quiet`` silences both. A command's process keeps the memory it frees for its next arrays
(:func:`tune_allocator`; glibc only, unless the user tuned the allocator).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Optional

from holotrace import __version__
from holotrace.commands import COMMANDS
from holotrace.errors import HolotraceError
from holotrace.text import sanitize

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE_OR_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def build_parser(argv: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """The parser of every command; given ``argv``, only the command it names is imported (and set up with its
    options), the others are listed by name and help line."""
    p = argparse.ArgumentParser(
        prog="holotrace",
        description="Find where distributed GPU training wastes time, from PyTorch Profiler (Kineto) trace files.",
        epilog="Run 'holotrace COMMAND --help' for the options of a command. Exit codes: 0 ok, 1 findings/regressions "
        "that a CI gate should catch, 2 bad input or usage, 3 internal error.",
    )
    p.add_argument("--version", action="version", version=f"holotrace {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    wanted = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for entry in COMMANDS:
        if wanted is None or entry.name == wanted:
            cp = entry.load().register(sub)
            cp.add_argument(
                "-v",
                "--verbose",
                action="store_true",
                help="also print informational messages on stderr (--quiet: warnings neither)",
            )
        else:
            entry.register_help_only(sub)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    # holotrace makes no BLAS calls: numpy's OpenBLAS threads would only spin on the cores after numpy's import
    # (0.03-0.06 s of CPU per command); set before numpy is imported, unless the user chose otherwise
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # and no huge pages asked for numpy's arrays of 4 MB and more: a command makes and frees such arrays all along,
    # and each fault of a fresh huge page may wait for the kernel to compact memory (the 8 x 100 MB job, 9 runs
    # each: system time 0.36 -> 0.24 s on `summary`, `report` 1.22 -> 0.98 s and `advise` 0.92 -> 0.78 s median)
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        with _collector_after_imports():
            parser = build_parser(argv)
            args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return EXIT_USAGE_OR_INPUT
        debug = getattr(args, "debug", False)
        tune_allocator()
        from holotrace.commands._log import run_logging

        with run_logging(verbose=getattr(args, "verbose", False), quiet=getattr(args, "quiet", False)):
            return _run(args, debug)
    finally:
        gc.unfreeze()  # (a caller in this process: what it holds is the collector's again)


@contextmanager
def _collector_after_imports() -> Iterator[None]:
    """No garbage collection while the command's modules are imported (numpy's and ours make tens of thousands of
    objects and no garbage), and those objects left out of every later collection (``gc.freeze``): about 60
    collections and 6-10 ms of every command's start."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


#: glibc's ``mallopt`` parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def tune_allocator() -> bool:
    """Let glibc's allocator keep the memory a command frees for its next arrays (a command's process, not the
    library's users): arrays up to 32 MB from the heap rather than fresh mappings, and freed heap kept up to 1 GB.
    The analyses allocate and free arrays of a column's length again and again; given back to the system each
    time, every reuse faults its pages in anew (on the 8 x 100 MB job's ``summary``: 101 k -> 69 k page faults,
    0.5 -> 0.2 s of system time, peak within 10 MB). One arena for every thread: with an arena per thread, each
    keeps what its thread freed, and the command's threads (per-rank analyses beside the job replay) add up their
    arenas' peaks (the same ``summary``: peak 511 -> 432 MB, wall and CPU within noise; ``advise`` 590 -> 550 MB,
    +0.02 s). Nothing is changed where the user tuned the allocator
    (``MALLOC_*`` or ``GLIBC_TUNABLES`` set) or where the C library is not glibc. True when it was set."""
    if not sys.platform.startswith("linux") or "GLIBC_TUNABLES" in os.environ:
        return False
    if any(k.startswith("MALLOC_") for k in os.environ):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):  # musl's mallopt accepts nothing
            return False
        return (
            bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20))
            and bool(libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30))
            and bool(libc.mallopt(_M_ARENA_MAX, 1))
        )
    except (OSError, AttributeError):
        return False


def _run(args: argparse.Namespace, debug: bool) -> int:
    try:
        from holotrace.commands._dest import check_destinations

        check_destinations(args)  # before any work: an output that cannot be written is a one-line error at once
        return int(args.run(args) or 0)
    except HolotraceError as e:
        if debug:
            raise
        print(f"holotrace: error: {sanitize(str(e))}", file=sys.stderr)
        return EXIT_USAGE_OR_INPUT
    except KeyboardInterrupt:
        print("holotrace: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug: say so in one line, traceback with --debug
        if debug:
            raise
        print(
            f"holotrace: internal error: {type(e).__name__}: {sanitize(str(e))} (run again with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def command() -> None:
    """The ``holotrace`` command: :func:`main`, then the process ends once what must run at exit has run (the
    cache writes, the log handlers: ``atexit``), without tearing the interpreter down. Freeing every array and
    module of a large job takes 20-80 ms after the answer is printed; a command that still has a thread of its
    own running exits the usual way."""
    try:
        code = main()
    except SystemExit as e:
        code = e.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # as sys.exit prints any other object and exits with 1
        print(code, file=sys.stderr)
        code = 1
    import atexit
    import threading

    run_exit = getattr(atexit, "_run_exitfuncs", None)
    if run_exit is None:
        sys.exit(code)
    run_exit()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):  # a reader that went away, or a closed stream
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    command()
