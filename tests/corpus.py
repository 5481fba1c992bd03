"""Where the real traces and HTA's reference outputs are (imported by tests as ``corpus``)."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"
SHARED = REPO.parent / "shared"  # the full corpus, present in CI, absent on a user's fresh clone
#: the trace folders bundled with the tests (a fresh clone has them)
BUNDLED = sorted(p for p in (DATA / "traces").iterdir() if p.is_dir())


def golden_jobs(include_shared: bool = True, include_reordered: bool = True) -> list[tuple[str, Path, Path]]:
    """(job, trace folder, golden folder) for the bundled jobs and, when present, the shared corpus; with
    ``include_reordered``, also the bundled jobs with equal-time events reversed (:func:`reordered_jobs`)."""
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
    out = list(jobs.values())
    if include_reordered:
        out += [j for j in _reordered_once() if j[0] not in jobs]
    return out


_REORDERED: list = []


def _reordered_once() -> list[tuple[str, Path, Path]]:
    """:func:`reordered_jobs` written once per test run into a temporary folder removed at exit."""
    if not _REORDERED:
        import atexit
        import shutil
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="holotrace-ties-"))
        atexit.register(shutil.rmtree, root, True)
        _REORDERED.append(reordered_jobs(root))
    return _REORDERED[0]


def shared_or_skip() -> Path:
    if not (SHARED / "traces").is_dir():
        pytest.skip(
            "full trace corpus (../shared/traces beside the repository) not present; bundled tests/data still run"
        )
    return SHARED


# bundled jobs whose launch queue or copy bandwidth has points at equal times, where HTA's unstable sort
# (numpy's default sort, whose order of equal keys depends on the CPU) decides the order
TIE_JOBS = ("tracelens_mi210_gpu_only",)
REORDERED = "@ties-reversed"
_SERIES_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"}


def reverse_ties(src: Path, dest: Path) -> Path:
    """A copy of the trace folder ``src`` in ``dest`` where, among the launch calls and GPU operations with
    equal ``ts`` as HTA reads it (whole µs, fractions rounded up), the threads (streams) stand in reverse
    order; each thread keeps the order of its own events, and every other event keeps its place. These are
    the points of the queue-length and bandwidth series, which HTA orders with an unstable sort: this is
    another order of equal times that its sort may produce. (The order within a thread has a meaning, e.g.
    an operator's launches in sequence, in HTA as in holotrace; CPU operators are not moved.)"""
    import gzip
    import json
    import math

    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):
        if not f.is_file():
            continue
        gz = f.name.endswith(".gz")
        if not (f.name.endswith(".json") or f.name.endswith(".json.gz")):
            (dest / f.name).write_bytes(f.read_bytes())
            continue
        raw = gzip.decompress(f.read_bytes()) if gz else f.read_bytes()
        doc = json.loads(raw)
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        slots: dict = {}
        for i, e in enumerate(events):
            if isinstance(e, dict) and isinstance(e.get("ts"), (int, float)) and e.get("cat") in _SERIES_CATS:
                slots.setdefault(math.ceil(e["ts"]), []).append(i)
        out = list(events)
        for idx in slots.values():
            threads: dict = {}
            for i in idx:
                threads.setdefault((str(events[i].get("pid")), str(events[i].get("tid"))), []).append(i)
            moved = [i for t in reversed(list(threads.values())) for i in t]
            for a, b in zip(idx, moved):
                out[a] = events[b]
        if isinstance(doc, dict):
            doc["traceEvents"] = out
        else:
            doc = out
        data = json.dumps(doc).encode()
        (dest / f.name).write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return dest


def reordered_jobs(root: Path) -> list[tuple[str, Path, Path]]:
    """The bundled :data:`TIE_JOBS` with their equal-time events reversed (written under ``root``), each
    with the golden outputs of the original: every golden comparison must hold for both orders."""
    out = []
    for name, traces, golden in golden_jobs(include_shared=False, include_reordered=False):
        if name in TIE_JOBS:
            out.append((name + REORDERED, reverse_ties(traces, root / name), golden))
    return out
