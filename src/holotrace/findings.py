"""Findings: what loading and validation found doubtful about a job, with evidence.

Every finding carries a :class:`FindingCode`. The enum is the one list of codes: each member states its
default severity, a one-line meaning, and whether it changes what analysis numbers mean (``affects_numbers``)
or whether numbers compared across ranks can be trusted (``cross_rank``). ``docs/loading.md`` documents
every code and what to do about it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional, Union

__all__ = ["Severity", "FindingCode", "Finding", "AFFECTING_CODES", "CROSS_RANK_CODES", "rank_ranges"]


class Severity(str, Enum):
    """How bad a finding is: an error means numbers are wrong or incomplete; ``strict`` loading raises on it."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO


class FindingCode(str, Enum):
    """Every finding code. Compares equal to its string (``FindingCode.TRUNCATED_JSON == "truncated_json"``)."""

    severity: Severity
    meaning: str
    affects_numbers: bool
    cross_rank: bool

    def __new__(cls, value: str, severity: Severity, affects_numbers: bool, cross_rank: bool, meaning: str):
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.severity = severity
        obj.affects_numbers = affects_numbers
        obj.cross_rank = cross_rank
        obj.meaning = meaning
        return obj

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__

    @classmethod
    def parse(cls, code: Union[FindingCode, str]) -> FindingCode:
        """The member for ``code``; ``ValueError`` for a code that is not a member (a programming error)."""
        if isinstance(code, cls):
            return code
        try:
            return cls(code)
        except ValueError:
            raise ValueError(
                f"unknown finding code {code!r}: add it to holotrace.findings.FindingCode "
                f"and document it in docs/loading.md"
            ) from None

    #                   value                   severity  affects cross   meaning
    # -- files and ranks (ingest.discover)
    SKIPPED_FILE = (
        "skipped_file",
        _E,
        False,
        False,
        "a file was not loaded (not a trace, empty, unreadable or damaged at its start)",
    )
    RANK_ASSIGNED = (
        "rank_assigned",
        _W,
        False,
        False,
        "a file states no rank (no distributedInfo.rank, none in its name): a number was assigned",
    )
    DUPLICATE_RANK = (
        "duplicate_rank",
        _E,
        True,
        True,
        "several files claim the same rank: only the first (name order) was loaded",
    )
    BAD_RANK_INFO = (
        "bad_rank_info",
        _W,
        False,
        False,
        "distributedInfo.rank or world_size is not a usable number (negative, not an integer, too large): ignored",
    )
    MIXED_JOBS = (
        "mixed_jobs",
        _E,
        True,
        True,
        "files disagree on world_size or backend: they come from different jobs",
    )
    MISSING_RANKS = ("missing_ranks", _E, True, True, "ranks below world_size have no trace file")
    INCOMPLETE_INGEST = (
        "incomplete_ingest",
        _E,
        True,
        True,
        "an ingest run into this folder stopped before it finished: ranks it was to write are missing",
    )
    RANK_OUT_OF_RANGE = ("rank_out_of_range", _E, True, True, "a rank is not below the job's world_size")
    # -- decoding one file (ingest.decode)
    TRUNCATED_GZIP = (
        "truncated_gzip",
        _E,
        True,
        False,
        "the gzip stream ends early: only the part before the cut was read",
    )
    TRUNCATED_JSON = (
        "truncated_json",
        _E,
        True,
        False,
        "the event list is cut off or damaged: the events before the damage were read",
    )
    NON_STANDARD_JSON = (
        "non_standard_json",
        _W,
        False,
        False,
        "the file uses NaN or Infinity literals, which JSON does not allow",
    )
    MISSING_TIME = (
        "missing_time",
        _E,
        True,
        False,
        "events with a duration (every X event) have no ts/dur, or null or NaN: they were left out",
    )
    NEGATIVE_DURATION = ("negative_duration", _E, True, False, "events have a negative duration: they were left out")
    BAD_TIME = (
        "bad_time",
        _E,
        True,
        False,
        "events have a ts/dur that is not a usable number (Infinity, text, beyond 146 years): they were left out",
    )
    BAD_NUMBER = (
        "bad_number",
        _E,
        True,
        False,
        "events have an integer (pid, tid, id, an arg) that does not fit in 64 bits: they were left out",
    )
    TRAILING_DATA = (
        "trailing_data",
        _W,
        False,
        False,
        "bytes after the end of the gzip stream are not gzip data: they were ignored",
    )
    ABSURD_DURATION = ("absurd_duration", _W, True, False, "events last longer than 7 days (kept)")
    BAD_ARG_TYPE = (
        "bad_arg_type",
        _W,
        False,
        False,
        "an integer arg has non-integer values: they were read as the default",
    )
    UNSUPPORTED_PHASE = (
        "unsupported_phase",
        _I,
        True,
        False,
        "begin/end (B/E, b/e/n) events are not paired into spans: they are not analysed",
    )
    # -- one rank's events (model.validate.check_rank)
    NO_EVENTS = ("no_events", _W, True, False, "the rank's trace has no events with a duration")
    UNKNOWN_CATEGORY = (
        "unknown_category",
        _W,
        True,
        False,
        "events of categories no classification rule knows were kept as OTHER",
    )
    NO_CATEGORY = ("no_category", _W, True, False, "events have no 'cat' field (HTA drops them)")
    OVERLAPPING_KERNELS = (
        "overlapping_kernels",
        _W,
        True,
        False,
        "a GPU activity starts before the previous one on the same stream ends",
    )
    GPU_WITHOUT_LAUNCH = ("gpu_without_launch", _I, True, False, "GPU activities have no CPU launch in the trace")
    LAUNCH_WITHOUT_GPU = ("launch_without_gpu", _I, False, False, "launch calls have no GPU activity in the trace")
    NEGATIVE_QUEUE_LENGTH = (
        "negative_queue_length",
        _W,
        True,
        False,
        "a stream's launch queue length goes below zero: GPU work starts before its launch call",
    )
    # -- the job as a whole (model.validate.check_job)
    NO_PROFILER_STEPS = (
        "no_profiler_steps",
        _I,
        True,
        False,
        "no ProfilerStep#N annotations: the whole trace is one step",
    )
    STEPS_MISSING_ON_RANKS = (
        "steps_missing_on_ranks",
        _W,
        True,
        False,
        "some ranks have ProfilerStep#N annotations and others do not",
    )
    CLOCK_SKEW = (
        "clock_skew",
        _W,
        True,
        True,
        "rank clocks cannot be compared, or first events of ranks are more than 1 s apart",
    )


#: codes whose findings change what analysis numbers mean (the summary shows them under its tables)
AFFECTING_CODES: frozenset[str] = frozenset(c.value for c in FindingCode if c.affects_numbers)
#: codes whose findings make numbers compared across ranks incomplete or unreliable
CROSS_RANK_CODES: frozenset[str] = frozenset(c.value for c in FindingCode if c.cross_rank)


@dataclass
class Finding:
    """One thing validation found. ``severity``: error | warning | info; ``code``: a :class:`FindingCode`
    (its string is accepted and normalised; an unknown code raises ``ValueError``)."""

    severity: str
    code: FindingCode
    message: str
    rank: Optional[int] = None
    file: Optional[str] = None
    count: int = 1
    example: Optional[str] = None

    def __post_init__(self) -> None:
        self.code = FindingCode.parse(self.code)
        try:
            self.severity = Severity(self.severity).value
        except ValueError:
            raise ValueError(
                f"unknown severity {self.severity!r} for finding {self.code.value} "
                f"(one of: {', '.join(s.value for s in Severity)})"
            ) from None

    @classmethod
    def of(
        cls,
        code: Union[FindingCode, str],
        message: str,
        rank: Optional[int] = None,
        file: Optional[str] = None,
        count: int = 1,
        example: Optional[str] = None,
        *,
        severity: Optional[str] = None,
    ) -> Finding:
        """A finding of ``code`` at the code's default severity unless ``severity`` is given."""
        code = FindingCode.parse(code)
        return cls(severity if severity is not None else code.severity.value, code, message, rank, file, count, example)

    def as_dict(self) -> dict[str, Any]:
        """Plain values (strings, numbers, None) for JSON and tables."""
        d = {k: getattr(self, k) for k in ("severity", "code", "rank", "file", "count", "message", "example")}
        d["code"] = self.code.value
        d["severity"] = str(self.severity)
        return d

    def line(self) -> str:
        where = []
        if self.rank is not None:
            where.append(f"rank {self.rank}")
        if self.file:
            where.append(self.file)
        loc = f" [{', '.join(where)}]" if where else ""
        ex = f" e.g. {self.example}" if self.example else ""
        return f"{self.severity.upper()} {self.code.value}{loc}: {self.message}{ex}"


def rank_ranges(nums: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``'0-2, 5, 7-8'``."""
    nums = sorted(nums)
    out = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(out)
