"""Critical paths and what to fix first.

* one rank, HTA's graph (spec 25): :mod:`.graph` (arrays), :mod:`.sync` (its sync edges), :mod:`.longest`
  (networkx's longest path on arrays), :mod:`.path` (``critical_path``, ``breakdown``, ``summary``),
  :mod:`.steps` (the one step loop: ``step_graphs``, ``step_paths``, ``per_step``), :mod:`.what_if` (re-timing
  one rank's step graphs);
* the whole job (every rank, cross-rank collective edges): :mod:`.collectives` (matching), :mod:`.job_graph`,
  :mod:`.replay` (its step tables: :mod:`.step_times`), :mod:`.job_what_if`, :mod:`.advice` (the fixes ranked), :mod:`.costliest` (which rank costs the job most, and why).

The names below are the single-rank API, kept at the package level (imported on first use: the job's
analyses do not import the single-rank path).
"""

import importlib

_FROM = {
    **dict.fromkeys(
        ("BOUND_CLASSES", "CriticalPath", "breakdown", "critical_path", "longest_path", "solve", "summary"), "path"
    ),
    **dict.fromkeys(("per_step", "step_graphs", "step_paths", "step_rows"), "steps"),
}

__all__ = [
    "BOUND_CLASSES",
    "CriticalPath",
    "breakdown",
    "critical_path",
    "longest_path",
    "per_step",
    "solve",
    "step_graphs",
    "step_paths",
    "step_rows",
    "summary",
]


def __getattr__(name: str):
    if name in _FROM:
        return getattr(importlib.import_module(f"{__name__}.{_FROM[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted([*globals(), *__all__])
