"""Typed exceptions raised by holotrace.

Every error names the file (when there is one), the problem and, where one
exists, the fix, so that ``str(error)`` is a complete one-line message.
"""

from __future__ import annotations

from pathlib import Path


class HolotraceError(Exception):
    """Base class of every error holotrace raises on purpose."""

    def __init__(self, problem: str, *, path: str | Path | None = None, fix: str | None = None):
        self.path = str(path) if path is not None else None
        self.problem = problem
        self.fix = fix
        parts = []
        if self.path:
            parts.append(f"{self.path}: ")
        parts.append(problem)
        if fix:
            parts.append(f" ({fix})")
        super().__init__("".join(parts))


class TraceNotFoundError(HolotraceError, FileNotFoundError):
    """A path does not exist, or a folder holds no trace file."""


class TraceReadError(HolotraceError, OSError):
    """A file exists but cannot be read (permissions, damaged gzip, bad encoding)."""


class TraceFormatError(HolotraceError, ValueError):
    """A file was read but is not a usable Kineto trace (not JSON, no traceEvents, ...)."""


class TraceEventError(TraceFormatError):
    """Events in a trace carry impossible values (missing ts, NaN or negative durations, ...)."""


class JobConsistencyError(HolotraceError, ValueError):
    """The set of files does not form one consistent job (strict mode)."""


class AnalysisError(HolotraceError, ValueError):
    """An analysis was asked for something the loaded job cannot answer."""


class RankNotFoundError(AnalysisError, KeyError):
    """A rank was requested that the job does not have."""

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return self.args[0] if self.args else ""


class PlottingUnavailableError(HolotraceError, ImportError):
    """``visualize=True`` was asked for but plotly (the ``plot`` extra) is not installed."""


class OutputError(HolotraceError, OSError):
    """An output cannot be written: its destination is unusable (a missing or read-only folder, a folder where a
    file is meant, a device) or the write failed (disk full, the file-size limit)."""


class NoRoomError(OutputError, TraceReadError):
    """A file could be read but its decoded columns could not be written (the disk full, the file-size limit):
    no fault of the file."""


class WorkerLostError(HolotraceError, RuntimeError):
    """The process (or Ray worker) decoding a file was lost at every try: killed by a signal or out of memory. No
    fault of the file."""


class RulesError(HolotraceError, ValueError):
    """A rules file (``--rules``, ``$HOLOTRACE_RULES``, ``rules=``) cannot be read or has a bad line."""
