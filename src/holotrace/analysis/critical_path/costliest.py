"""Which rank costs the job most, and why: the answer's form (:class:`CostliestRank`) and the answer for a job of one
rank, which needs no replay (:func:`one_rank`). :func:`~holotrace.analysis.critical_path.advice.costliest_rank` gives
the one answer ``summary``, ``stragglers``, ``advise`` and the report show; a command can ask :func:`one_rank` first
and import the replay only when the job has several ranks."""

from __future__ import annotations

from dataclasses import dataclass

from holotrace.model import classify

__all__ = ["LONGEST_VS_LAST", "CostliestRank", "has_nodes", "one_rank", "only_rank"]

LONGEST_VS_LAST = (
    "'Longest step' is the rank whose own step takes longest; 'arrives last' is the rank the others "
    "wait for in collectives: a rank can have the longest step only because it waits for a late one."
)


@dataclass
class CostliestRank:
    """The rank whose fix saves the job most, why (one sentence, evidence named), and the two ranks the
    question is often confused with."""

    rank: int | None
    why: str
    saving_ms: float = 0.0
    arrives_last: int | None = None
    longest_step: int | None = None

    def as_dict(self) -> dict:
        return {"rank": self.rank, "why": self.why}


def one_rank(source) -> CostliestRank | None:
    """The answer for a job of one rank that has job-graph nodes (that rank, whatever a replay finds), else None:
    :func:`~holotrace.analysis.critical_path.advice.costliest_rank` replays the job then."""
    from holotrace.model.view import job_view

    view = job_view(source, classify.NATIVE)
    if len(view.ranks) != 1 or not has_nodes(view, view.ranks[0]):
        return None
    return only_rank(view.ranks[0])


def only_rank(r: int) -> CostliestRank:
    """The answer for a job whose one rank is ``r`` (the replay's answer too)."""
    return CostliestRank(r, f"rank {r} is the only rank", 0.0, None, r)


def has_nodes(view, r: int) -> bool:
    """Whether rank ``r`` has any node of the job graph (:mod:`~holotrace.analysis.critical_path.job_graph`): a
    runtime/driver call on a CPU thread, a ``ProfilerStep`` or a GPU operation on a stream."""
    from holotrace.analysis.critical_path.steps import step_rows

    rv = view[r]
    kind, on_stream = rv["kind"], rv["stream"] != -1
    if (classify.kind_in(kind, (classify.Kind.RUNTIME, classify.Kind.DRIVER)) & ~on_stream).any():
        return True
    if (classify.is_gpu_activity(kind) & on_stream).any():
        return True
    return bool(step_rows(rv, view.strings, classify.NATIVE, view.per_string(classify.NATIVE.step_number)))
