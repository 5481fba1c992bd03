"""Findings: what loading and validation found doubtful about a job, with evidence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

__all__ = ["Finding", "rank_ranges"]


@dataclass
class Finding:
    """One thing validation found. ``severity``: error | warning | info."""

    severity: str
    code: str
    message: str
    rank: Optional[int] = None
    file: Optional[str] = None
    count: int = 1
    example: Optional[str] = None

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("severity", "code", "rank", "file", "count", "message", "example")}

    def line(self) -> str:
        where = []
        if self.rank is not None:
            where.append(f"rank {self.rank}")
        if self.file:
            where.append(self.file)
        loc = f" [{', '.join(where)}]" if where else ""
        ex = f" e.g. {self.example}" if self.example else ""
        return f"{self.severity.upper()} {self.code}{loc}: {self.message}{ex}"


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
