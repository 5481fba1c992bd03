"""Which job replay a command runs: the job graph of every rank in one process up to :data:`JOB_GRAPH_MAX_RANKS`
ranks, the scale-out replay at collective granularity above it (:mod:`holotrace.scale.segment_run`);
``--replay graph|segments`` or ``$HOLOTRACE_REPLAY`` chooses one whatever the number of ranks. Kept apart from the
replays themselves, so that choosing imports neither."""

from __future__ import annotations

import os
from typing import Optional

from holotrace.errors import AnalysisError

__all__ = ["ENV_REPLAY", "JOB_GRAPH_MAX_RANKS", "REPLAY_CHOICES", "choose_replay"]

JOB_GRAPH_MAX_RANKS = 64  # above this many ranks the job is replayed at collective granularity
ENV_REPLAY = "HOLOTRACE_REPLAY"
REPLAY_CHOICES = ("auto", "graph", "segments")


def choose_replay(n_ranks: int, asked: Optional[str] = None) -> str:
    """``"graph"`` up to :data:`JOB_GRAPH_MAX_RANKS` ranks, ``"segments"`` above; ``asked`` (or
    ``$HOLOTRACE_REPLAY``) other than ``auto`` chooses instead."""
    want = (asked or os.environ.get(ENV_REPLAY) or "auto").strip().lower()
    if want not in REPLAY_CHOICES:
        raise AnalysisError(
            f"unknown replay {want!r} (from --replay or ${ENV_REPLAY})", fix=f"use one of {', '.join(REPLAY_CHOICES)}"
        )
    if want != "auto":
        return want
    return "segments" if n_ranks > JOB_GRAPH_MAX_RANKS else "graph"
