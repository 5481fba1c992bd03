"""Comparison of two jobs, or of two step ranges of one job: what got slower or faster, and why.

:func:`diff_jobs` runs the existing analyses on both sides (each step of each side on its own, through a
filtered view) and compares them:

* ``metrics``: per analysis — step time (:mod:`~holotrace.analysis.steps`), idle / compute / non-compute
  share of the kernel span (:mod:`~holotrace.analysis.temporal`), idle time by cause per step
  (:mod:`~holotrace.analysis.idle`), communication hidden behind compute
  (:mod:`~holotrace.analysis.overlap`), median launch delay (:mod:`~holotrace.analysis.launches`) — as the
  mean over steps of the per-step value, with the step-to-step standard deviation (``*_sigma``);
* ``ops``: per kernel / operator / annotation name (after name normalisation), per rank and merged
  (``rank == -1``): count, total, mean, p50 and p95 per instance, total per step per rank with its
  step-to-step spread, and the change; ``status`` says whether the name appeared or disappeared;
* ``contributors``: kernels and idle causes ordered by how much they changed the time of a step of a rank;
* ``merged_names``: the raw names that normalisation merged into one key;
* ``notes``: what makes the comparison weaker (different ranks or step counts, few shared names).

Steps are matched by position. :func:`check_rules` evaluates CI gate rules (``step_time>+5%``,
``idle>+2pp``, ``kernel:nccl*>+10%``, ``overlap<-5pp``) with a noise guard (the change must exceed
``min_effect`` × the step-to-step spread of the base side). Times are µs.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis import idle, launches, overlap, steps, temporal
from holotrace.analysis.annotations import shorten_names
from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE, Kind, RuleSet
from holotrace.model.filter import filter_view
from holotrace.model.view import JobView, job_view

__all__ = ["JobDiff", "Trip", "diff_jobs", "parse_rule", "check_rules", "METRICS", "NORMALISATIONS"]

#: metric name → unit ("pct": a percentage, compared in points; "us": time)
METRICS = {"step_time": "us", "idle": "pct", "compute": "pct", "non_compute": "pct", "host_wait": "us",
           "kernel_wait": "us", "other_idle": "us", "overlap": "pct", "launch_delay": "us"}
NORMALISATIONS = ("none", "short", "template")
_STEP = re.compile(r"^ProfilerStep#\d+$")  # steps are matched by position: their names compare as one
_OP_KINDS = {"kernel": None, "op": (int(Kind.CPU_OP),), "annotation": (int(Kind.USER_ANNOTATION), int(Kind.GPU_ANNOTATION))}


@dataclass
class JobDiff:
    """Result of :func:`diff_jobs` (frames described in the module docstring)."""

    metrics: pd.DataFrame
    ops: pd.DataFrame
    contributors: pd.DataFrame
    merged_names: pd.DataFrame
    notes: list = field(default_factory=list)
    base_steps: list = field(default_factory=list)
    new_steps: list = field(default_factory=list)
    ranks: tuple = ((), ())


class Trip(NamedTuple):
    """One gate rule that tripped: on what item, by how much."""

    rule: str
    item: str
    base: float
    new: float
    change: float
    unit: str
    sigma: float

    def message(self) -> str:
        u = {"%": "%", "pp": " pp", "us": " us"}[self.unit]
        return (f"{self.item}: {self.base:.6g} -> {self.new:.6g} ({self.change:+.3g}{u}; base step-to-step "
                f"sigma {self.sigma:.3g}) trips {self.rule}")


# ----------------------------------------------------------------------------------------- one side
def _steps_of(view: JobView, wanted: Optional[Sequence[int]]) -> list:
    have = steps.profiler_steps(view)
    if wanted is None:
        return have
    missing = [s for s in wanted if s not in have]
    if missing:
        raise AnalysisError(f"steps {missing} are not in the job", fix=f"choose among {have}")
    return list(wanted)


def _per_step_metrics(view: JobView, step_list: list) -> pd.DataFrame:
    """One row per step (or one for the whole job when it has no steps) of every metric."""
    st = steps.step_times(view)
    rows = []
    for s in step_list or [None]:
        sub = view if s is None else filter_view(view, steps=(s,))
        tb = temporal.breakdown(sub)
        span = tb["span_us"].sum()
        pct = (lambda c: 100.0 * tb[c].sum() / span if span > 0 else np.nan)  # noqa: E731
        ib = idle.idle_breakdown(sub)
        by_cause = ib.groupby("idle_category")["idle_us"].sum() / max(len(sub.ranks), 1)
        ov = overlap.comm_comp_overlap(sub)
        comm = ov["comm_us"].sum()
        ls = launches.launch_stats(sub)
        delays = np.concatenate([d["launch_delay"].to_numpy() for d in ls.values()]) if ls else np.empty(0)
        step_time = (st.loc[st["step"] == s, "dur_us"].mean() if s is not None
                     else float(tb["span_us"].mean()) if len(tb) else np.nan)
        rows.append({"step": -1 if s is None else s, "step_time": step_time, "idle": pct("idle_us"),
                     "compute": pct("compute_us"), "non_compute": pct("non_compute_us"),
                     "host_wait": by_cause.get("host_wait", 0.0), "kernel_wait": by_cause.get("kernel_wait", 0.0),
                     "other_idle": by_cause.get("other", 0.0),
                     "overlap": 100.0 * ov["overlap_us"].sum() / comm if comm > 0 else np.nan,
                     "launch_delay": float(np.median(delays)) if len(delays) else np.nan})
    return pd.DataFrame(rows)


def _normalise(names: np.ndarray, how: str) -> np.ndarray:
    if how == "none":
        return names
    if how == "short":
        return shorten_names(names)
    out = []
    for s in names.tolist():  # strip template arguments only: one pass per distinct name
        depth, buf = 0, []
        for ch in s:
            if ch == "<":
                depth += 1
            elif ch == ">" and depth:
                depth -= 1
            elif not depth:
                buf.append(ch)
        out.append("".join(buf))
    return np.asarray(out, dtype=object)


def _op_rows(view: JobView, step_list: list, how: str) -> pd.DataFrame:
    """Every kernel / operator / annotation instance: ``family, key, raw, rank, step, dur_us``."""
    parts = []
    for r in view.ranks:
        v = view[r]
        kind = v["kind"]
        for family, kinds in _OP_KINDS.items():
            sel = v["gpu"] if kinds is None else np.isin(kind, kinds)
            rows = np.flatnonzero(sel)
            if not len(rows):
                continue
            parts.append(pd.DataFrame({"family": family, "name_id": v["name"][rows], "rank": np.int64(r),
                                       "step": v["iteration"][rows].astype(np.int64),
                                       "dur_us": view.us(v["dur"][rows])}))
    if not parts:
        return pd.DataFrame({"family": [], "key": [], "raw": [], "rank": [], "step": [], "dur_us": []})
    df = pd.concat(parts, ignore_index=True)
    if step_list:
        df = df[df["step"].isin(step_list)]
    uniq, inv = np.unique(df["name_id"].to_numpy(), return_inverse=True)
    raw = view.names(uniq)
    df["raw"] = raw[inv.reshape(-1)]
    keys = _normalise(raw, how)
    keys = np.where([bool(_STEP.match(k)) for k in keys.tolist()], "ProfilerStep#N", keys).astype(object)
    df["key"] = keys[inv.reshape(-1)]
    return df.drop(columns="name_id")


def _op_stats(df: pd.DataFrame, n_steps: int, n_ranks: int) -> pd.DataFrame:
    """Per (family, key, rank) and merged (rank −1): count, totals, instance statistics, per-step spread."""
    both = pd.concat([df, df.assign(rank=np.int64(-1))], ignore_index=True)
    g = both.groupby(["family", "key", "rank"], sort=False)["dur_us"]
    out = g.agg(count="count", total_us="sum", mean_us="mean", p50_us="median").reset_index()
    out["p95_us"] = g.quantile(0.95).to_numpy()
    per_step = both.groupby(["family", "key", "rank", "step"], sort=False)["dur_us"].sum()
    ranks_of = np.where(out["rank"].to_numpy() == -1, n_ranks, 1)
    sq = per_step.unstack("step", fill_value=0.0)
    full = sq.reindex(pd.MultiIndex.from_frame(out[["family", "key", "rank"]]), fill_value=0.0).to_numpy()
    if full.shape[1] < n_steps:  # steps without this name count as zero
        full = np.hstack([full, np.zeros((len(full), n_steps - full.shape[1]))])
    out["per_step_us"] = out["total_us"] / max(n_steps, 1) / ranks_of
    out["per_step_sigma"] = (full.std(axis=1, ddof=1) / ranks_of) if full.shape[1] > 1 else 0.0
    return out


# ----------------------------------------------------------------------------------------- the diff
def diff_jobs(base, new, *, rules: Optional[RuleSet] = None, base_steps: Optional[Sequence[int]] = None,
              new_steps: Optional[Sequence[int]] = None, ranks: Optional[Sequence[int]] = None,
              normalize: str = "none") -> JobDiff:
    """Compare ``new`` with ``base`` (each a Job or a JobView; the same job twice with two step ranges).

    Args:
        rules: rule set of both sides (default holotrace's).
        base_steps, new_steps: the steps compared (default: every step of each side); matched by position.
        ranks: only these ranks on both sides (default: each side's ranks).
        normalize: kernel-name normalisation: ``none``, ``short`` (HTA's ``shorten_name``), ``template``
            (template arguments removed).
    """
    if normalize not in NORMALISATIONS:
        raise AnalysisError(f"unknown name normalisation {normalize!r}", fix=f"use one of {', '.join(NORMALISATIONS)}")
    rules = rules or NATIVE
    views = []
    for src in (base, new):
        v = job_view(src, rules)
        views.append(filter_view(v, ranks=ranks) if ranks is not None else v)
    bsteps, nsteps = _steps_of(views[0], base_steps), _steps_of(views[1], new_steps)
    notes = []
    if views[0].ranks != views[1].ranks:
        notes.append(f"different ranks: base has {views[0].ranks}, new has {views[1].ranks}; merged figures "
                     f"are per rank on average")
    if len(bsteps) != len(nsteps):
        notes.append(f"different step counts: base {len(bsteps)}, new {len(nsteps)}; per-step figures are means")
    if not bsteps or not nsteps:
        notes.append("a side has no ProfilerStep: its whole trace counts as one step")
    for label, v in (("base", views[0]), ("new", views[1])):
        if not any(v[r]["gpu"].any() for r in v.ranks):
            notes.append(f"{label} has no GPU activity: GPU figures are missing (NaN) on that side")
    per = [_per_step_metrics(v, s) for v, s in zip(views, (bsteps, nsteps))]
    metrics = pd.DataFrame([_metric_row(m, unit, per[0][m], per[1][m]) for m, unit in METRICS.items()])

    o = [_op_rows(v, s, normalize) for v, s in zip(views, (bsteps, nsteps))]
    stats = [_op_stats(d, max(len(s), 1), max(len(v.ranks), 1)) for d, s, v in zip(o, (bsteps, nsteps), views)]
    ops = _join_ops(*stats)
    kb, kn = (set(pd.unique(d.loc[d["family"] == "kernel", "raw"])) for d in o)
    if kb and kn and len(kb & kn) < 0.3 * min(len(kb), len(kn)):
        notes.append(f"only {len(kb & kn)} of {len(kb)} base / {len(kn)} new kernel names are shared: are these "
                     f"the same model?")
    merged = _merged_names(pd.concat(o, ignore_index=True))
    contrib = _contributors(ops, metrics)
    return JobDiff(metrics, ops, contrib, merged, notes, bsteps, nsteps, (tuple(views[0].ranks), tuple(views[1].ranks)))


def _metric_row(name: str, unit: str, b: pd.Series, n: pd.Series) -> dict:
    bm, nm = float(b.mean()), float(n.mean())
    return {"metric": name, "unit": "%" if unit == "pct" else "us", "base": bm, "new": nm, "delta": nm - bm,
            "delta_pct": 100.0 * (nm - bm) / abs(bm) if bm else np.nan,
            "base_sigma": float(b.std(ddof=1)) if b.notna().sum() > 1 else 0.0,
            "new_sigma": float(n.std(ddof=1)) if n.notna().sum() > 1 else 0.0}


def _join_ops(b: pd.DataFrame, n: pd.DataFrame) -> pd.DataFrame:
    key = ["family", "key", "rank"]
    out = b.merge(n, on=key, how="outer", suffixes=("_base", "_new"))
    for c in ("count", "total_us", "per_step_us"):
        out[f"{c}_base"] = out[f"{c}_base"].fillna(0)
        out[f"{c}_new"] = out[f"{c}_new"].fillna(0)
    out["per_step_sigma_base"] = out["per_step_sigma_base"].fillna(0.0)
    out["delta_per_step_us"] = out["per_step_us_new"] - out["per_step_us_base"]
    bps = out["per_step_us_base"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["delta_pct"] = np.where(bps > 0, 100.0 * out["delta_per_step_us"] / np.where(bps > 0, bps, 1), np.inf)
    cb, cn = out["count_base"].to_numpy(), out["count_new"].to_numpy()
    out["status"] = np.where(cb == 0, "appeared", np.where(cn == 0, "disappeared", "both"))
    for c in ("count_base", "count_new"):
        out[c] = out[c].astype(np.int64)
    cols = key + ["status", "count_base", "count_new", "total_us_base", "total_us_new", "mean_us_base", "mean_us_new",
                  "p50_us_base", "p50_us_new", "p95_us_base", "p95_us_new", "per_step_us_base", "per_step_us_new",
                  "per_step_sigma_base", "delta_per_step_us", "delta_pct"]
    order = np.lexsort((out["key"].to_numpy().astype(str), -out["delta_per_step_us"].abs().to_numpy(),
                        out["rank"].to_numpy()))
    return out[cols].iloc[order].reset_index(drop=True)


def _merged_names(df: pd.DataFrame) -> pd.DataFrame:
    pairs = df[["family", "key", "raw"]].drop_duplicates()
    n = pairs.groupby(["family", "key"])["raw"].transform("size")
    return pairs[n.to_numpy() > 1].sort_values(["family", "key", "raw"]).reset_index(drop=True)


def _contributors(ops: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """Merged kernels and idle causes by how much they changed a step of a rank (largest change first)."""
    k = ops[(ops["rank"] == -1) & (ops["family"] == "kernel")]
    items = [("kernel:" + k["key"].astype(str)).to_numpy(), np.asarray([f"idle:{c}" for c in
             ("host_wait", "kernel_wait", "other_idle")], dtype=object)]
    m = metrics.set_index("metric")
    causes = m.loc[["host_wait", "kernel_wait", "other_idle"]]
    out = pd.DataFrame({
        "item": np.concatenate(items),
        "base_us": np.concatenate([k["per_step_us_base"].to_numpy(), causes["base"].to_numpy()]),
        "new_us": np.concatenate([k["per_step_us_new"].to_numpy(), causes["new"].to_numpy()]),
        "base_sigma_us": np.concatenate([k["per_step_sigma_base"].to_numpy(), causes["base_sigma"].to_numpy()])})
    out["delta_us"] = out["new_us"] - out["base_us"]
    out = out[out["delta_us"].fillna(0) != 0]
    order = np.lexsort((out["item"].to_numpy().astype(str), -out["delta_us"].abs().to_numpy()))
    return out.iloc[order].reset_index(drop=True)


# ----------------------------------------------------------------------------------------- the gate
_RULE = re.compile(r"^\s*(?P<metric>[^<>]+?)\s*(?P<op>[<>])\s*(?P<value>[+-]?\d+(?:\.\d+)?)\s*(?P<unit>%|pp|us|ms)?\s*$")


def parse_rule(text: str) -> tuple:
    """``"kernel:nccl*>+10%"`` → ``(metric, op, value, unit)``; a bad rule raises a one-line AnalysisError."""
    m = _RULE.match(text)
    if not m:
        raise AnalysisError(f"cannot read the rule {text!r}", fix="write METRIC>+N% (or pp, us, ms), e.g. step_time>+5%")
    metric, op, value, unit = m.group("metric"), m.group("op"), float(m.group("value")), m.group("unit")
    family = metric.split(":", 1)[0] if ":" in metric else None
    if family is None and metric not in METRICS:
        raise AnalysisError(f"unknown metric {metric!r} in rule {text!r}",
                            fix=f"use {', '.join(METRICS)}, or kernel:GLOB, op:GLOB, annotation:GLOB")
    if family is not None and family not in _OP_KINDS:
        raise AnalysisError(f"unknown name family {family!r} in rule {text!r}", fix="use kernel:, op: or annotation:")
    if unit is None:
        unit = "pp" if METRICS.get(metric) == "pct" else "%"
    if unit == "pp" and METRICS.get(metric) != "pct":
        raise AnalysisError(f"rule {text!r}: pp applies to percentages only", fix="use % or us for this metric")
    if unit == "ms":
        unit, value = "us", value * 1000.0
    return metric, op, value, unit


def _change(base: float, new: float, unit: str) -> float:
    if unit == "%":
        return 100.0 * (new - base) / abs(base) if base else (np.inf if new > 0 else 0.0)
    return new - base


def check_rules(d: JobDiff, rules: Sequence[str], *, min_effect: float = 2.0) -> list:
    """The :class:`Trip` of every rule that trips (named items largest first): a change beyond the rule's
    value whose size also exceeds ``min_effect`` × the base's step-to-step standard deviation."""
    trips = []
    m = d.metrics.set_index("metric")
    for text in rules:
        metric, op, value, unit = parse_rule(text)
        if ":" in metric:
            family, pattern = metric.split(":", 1)
            ops = d.ops[(d.ops["rank"] == -1) & (d.ops["family"] == family)]
            hit = ops[[fnmatch.fnmatchcase(str(k), pattern) for k in ops["key"]]]
            cands = [(f"{family}:{k}", b, n, s) for k, b, n, s in zip(hit["key"], hit["per_step_us_base"],
                                                                        hit["per_step_us_new"], hit["per_step_sigma_base"])]
        else:
            row = m.loc[metric]
            cands = [(metric, row["base"], row["new"], row["base_sigma"])]
        for item, b, n, sigma in cands:
            if not (np.isfinite(b) and np.isfinite(n)):
                continue
            ch = _change(b, n, unit)
            beyond = ch > value if op == ">" else ch < value
            if beyond and abs(n - b) > min_effect * (sigma if np.isfinite(sigma) else 0.0):
                trips.append(Trip(text, item, float(b), float(n), float(ch), unit, float(sigma)))
    order = {t: i for i, t in enumerate(d.contributors["item"].tolist())}
    rank_of = (lambda t: order.get(t.item if ":" in t.item else "", order.get(f"idle:{t.item}", len(order))))  # noqa: E731
    return sorted(trips, key=lambda t: (rank_of(t), -abs(t.new - t.base)))
