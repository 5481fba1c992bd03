"""The comparison report's plots: a :class:`holotrace.analysis.diff.JobDiff`'s frames in, chart descriptions
(:mod:`holotrace.render.charts`) out, as :mod:`holotrace.render.plots` does for one job."""

from __future__ import annotations

import pandas as pd

from holotrace.render.charts import Bars, Series

__all__ = ["diff_contributors", "diff_metrics", "diff_changed", "diff_appeared"]


def diff_contributors(c: pd.DataFrame) -> Bars:
    """Change of a step's time by item (``JobDiff.contributors``: µs), biggest first."""
    return Bars(
        name="contributors",
        title="Biggest contributors to the change of a step",
        labels=c["item"].astype(str).tolist(),
        series=[Series("change", c["delta_us"].to_numpy() / 1e3)],
        unit="ms per step",
        digits=3,
        diverging=True,
        horizontal=True,
    )


def diff_metrics(m: pd.DataFrame) -> Bars:
    """Change of each per-step figure in percent of base (``JobDiff.metrics``)."""
    labels = [f"{a} ({'pp' if u == 'pct' else u})" for a, u in zip(m["metric"], m["unit"])]
    return Bars(
        name="metrics",
        title="Per-step figures, change from base",
        labels=labels,
        series=[Series("change", m["delta_pct"].fillna(0.0))],
        unit="% change from base",
        digits=1,
        diverging=True,
        horizontal=True,
    )


def diff_changed(f: pd.DataFrame, family: str, title: str) -> Bars:
    """Change of time per step of the names of one family (``JobDiff.ops`` rows, µs)."""
    return Bars(
        name=f"changed-{family}",
        title=title,
        labels=[str(k)[:70] for k in f["key"]],
        series=[Series("change", f["delta_per_step_us"].to_numpy() / 1e3, hover=f["key"].astype(str).tolist())],
        unit="ms per step",
        digits=3,
        diverging=True,
        horizontal=True,
    )


def diff_appeared(ops: pd.DataFrame) -> Bars:
    """Time per step of the names found in one run only (``short``, ``status`` and ``delta_ms`` columns)."""
    return Bars(
        name="appeared",
        title="Names that appeared or disappeared",
        labels=[f"{s} ({st})" for s, st in zip(ops["short"], ops["status"])],
        series=[Series("change", ops["delta_ms"])],
        unit="ms per step",
        digits=3,
        diverging=True,
        horizontal=True,
    )
