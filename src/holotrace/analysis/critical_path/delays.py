"""The delays a replay of the job graph re-times with (:mod:`holotrace.analysis.critical_path.replay`): the unmodified
replay's, found once per graph, and the copies the what-ifs edit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from holotrace.analysis.critical_path.job_graph import JobGraph

__all__ = ["Delays", "base_delays", "shared_base"]


@dataclass
class Delays:
    """What a replay re-times with: one delay per chain position and per cross edge, and which cross edges hold."""

    chain: np.ndarray
    cross: np.ndarray
    keep: np.ndarray

    def copy(self) -> Delays:
        return Delays(self.chain.copy(), self.cross.copy(), self.keep.copy())

    def edited(self) -> Delays:
        """A copy to edit: its own chain delays; the cross delays and the held edges are this one's, read-only,
        until an edit asks for its own (:meth:`own`): most fixes edit the chain delays alone."""
        return Delays(self.chain.copy(), _read_only(self.cross), _read_only(self.keep))

    def own(self, name: str) -> np.ndarray:
        """The array ``name`` (``"chain"``, ``"cross"`` or ``"keep"``), made this copy's own to write first if it
        is shared (:meth:`edited`)."""
        a = getattr(self, name)
        if not a.flags.writeable:
            a = a.copy()
            setattr(self, name, a)
        return a


def _read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


def base_delays(g: JobGraph) -> Delays:
    """Delays of the unmodified replay: the binding edge keeps its lag, the others ``min(lag, floor)``."""
    first = g.chain_first
    lag = g.chain_lag
    at = g.point_of_position()[g.dst]  # (by chain position: the cross edges' destinations)
    best = lag.copy()  # per position: the smallest lag into its point
    best[first] = np.inf
    np.minimum.at(best, at, g.lag)
    chain_bind = lag <= best
    chain_bind &= ~first
    cross_bind = g.lag <= best[at]
    cross_bind &= ~chain_bind[at]
    # min(lag, floor) where the chain edge does not bind: the floor is 0 but at ``floor_pos`` (in ``best``'s memory:
    # read no more)
    chain = np.minimum(lag, 0.0, out=best)
    chain[g.floor_pos] = np.minimum(lag[g.floor_pos], g.floor_val)
    np.copyto(chain, lag, where=chain_bind)
    del lag
    chain[first] = 0.0
    cross = np.where(cross_bind, g.lag, np.minimum(g.lag, g.floor))
    return Delays(chain, cross, np.ones(len(g.src), dtype=bool))


def shared_base(g: JobGraph) -> Delays:
    """:func:`base_delays` of ``g``, computed once and kept on the graph: the what-ifs of one command start from
    it and never change it (they edit copies), so their replays can be kept on the graph too."""
    if "base" not in g.memo:
        g.memo["base"] = base_delays(g)
    return g.memo["base"]
