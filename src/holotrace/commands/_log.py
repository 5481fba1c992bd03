"""What the ``holotrace`` command prints on stderr besides errors: one log handler for the whole run.

* each distinct message once per run: repeats that differ only in numbers (a rank, a step, a count) are
  counted, and the message is printed once with how many times it came (``… (3 times; the first shown)``);
* warnings (something the user should know that the output cannot show) at the default level, printed
  when the run ends; informational facts at INFO, shown with ``-v`` as they come; ``--quiet`` silences both;
* every message goes through the one sanitiser (messages may quote names from a trace).

The library itself only logs (``logging.getLogger("holotrace...")``); a program using the API configures
logging as it likes. Warnings that change an answer are findings in the command's output, not log lines.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from holotrace.text import sanitize

__all__ = ["RunLog", "run_logging"]

_NUMBER = re.compile(r"\d+(\.\d+)?")


class RunLog(logging.Handler):
    """The CLI's handler: INFO printed as it comes (once per distinct message), warnings and errors
    collected and printed once each, with their count, by :meth:`finish`."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counts: dict[tuple[int, str], int] = {}
        self.first: dict[tuple[int, str], str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = sanitize(record.getMessage())
        except Exception:  # a bad format string in a log call must not end the run
            msg = sanitize(str(record.msg))
        key = (record.levelno, _NUMBER.sub("#", msg))
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        if n == 0:
            self.first[key] = msg
            if record.levelno < logging.WARNING:
                self._write(f"holotrace: {msg}")

    def finish(self) -> None:
        """Print every warning and error of the run once (in the order they first came), with its count;
        repeated informational messages get their count too."""
        for key, msg in self.first.items():
            level, n = key[0], self.counts[key]
            more = f" ({n} times; the first shown)" if n > 1 else ""
            if level >= logging.WARNING:
                self._write(f"holotrace: {logging.getLevelName(level).lower()}: {msg}{more}")
            elif n > 1:
                self._write(f"holotrace: {n} times in all: {msg}")
        self.counts.clear()
        self.first.clear()

    @staticmethod
    def _write(line: str) -> None:
        try:
            print(line, file=sys.stderr)  # the stderr of the moment (tests and callers may redirect it)
        except (BrokenPipeError, ValueError):
            pass


@contextmanager
def run_logging(*, verbose: bool = False, quiet: bool = False) -> Iterator[RunLog]:
    """The ``holotrace`` logger for one command run: one :class:`RunLog` handler; level INFO with
    ``verbose``, ERROR with ``quiet`` (nothing but errors), else WARNING. Restored afterwards."""
    logger = logging.getLogger("holotrace")
    handler = RunLog()
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING)
    logger.propagate = False  # one handler: never a second copy through the root logger's
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
        handler.finish()
