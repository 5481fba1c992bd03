"""Where the real traces and HTA's reference outputs are (imported by tests as ``corpus``)."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"
SHARED = REPO.parent / "shared"  # the full corpus, present in CI, absent on a user's fresh clone

def golden_jobs(include_shared: bool = True) -> list[tuple[str, Path, Path]]:
    """(job, trace folder, golden folder) for the bundled jobs and, when present, the shared corpus."""
    jobs: dict[str, tuple[str, Path, Path]] = {}
    if include_shared and (SHARED / "traces").is_dir() and (SHARED / "golden").is_dir():
        for g in sorted((SHARED / "golden").iterdir()):
            t = SHARED / "traces" / g.name
            if t.is_dir():
                jobs[g.name] = (g.name, t, g)
    for g in sorted((DATA / "golden").iterdir()) if (DATA / "golden").is_dir() else []:
        t = DATA / "traces" / g.name
        if t.is_dir() and g.name not in jobs:
            jobs[g.name] = (g.name, t, g)
    return list(jobs.values())


def shared_or_skip() -> Path:
    if not (SHARED / "traces").is_dir():
        pytest.skip("full trace corpus (../shared/traces beside the repository) not present; bundled tests/data still run")
    return SHARED
