"""Scale out: a job as a map over ranks (on the local pool or Ray) and a reduce over small per-rank summaries.

The names below are imported on first use: a command that only asks whether a folder is an ingest folder
(:mod:`holotrace.scale.store`) does not import the map and the reduce."""

import importlib

__all__ = ["JobSummary", "summarize", "ingest", "read_ingest"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("holotrace.scale.run"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted([*globals(), *__all__])
