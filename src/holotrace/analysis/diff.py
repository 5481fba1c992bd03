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

Steps are matched by position; :mod:`holotrace.analysis.diff_gate` turns a diff into CI gate verdicts. Times
are µs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import numpy as np
import pandas as pd

from holotrace.analysis import idle, launches, overlap, steps, temporal
from holotrace.analysis.diff_stats import coarser, group_stats, sort_groups
from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE, Kind, RuleSet, profiler_step_number
from holotrace.model.view import Columns, JobView, RankView, job_view
from holotrace.text import hta_short_names as shorten_names

__all__ = ["JobDiff", "diff_jobs", "FAMILIES", "METRICS", "NORMALISATIONS"]

#: metric name → unit ("pct": a percentage, compared in points; "us": time)
METRICS = {
    "step_time": "us",
    "idle": "pct",
    "compute": "pct",
    "non_compute": "pct",
    "host_wait": "us",
    "kernel_wait": "us",
    "other_idle": "us",
    "overlap": "pct",
    "launch_delay": "us",
}
NORMALISATIONS = ("none", "short", "template")
_OP_KINDS = {
    "kernel": None,
    "op": (int(Kind.CPU_OP),),
    "annotation": (int(Kind.USER_ANNOTATION), int(Kind.GPU_ANNOTATION)),
}
#: the name families an ``ops`` row (and a gate rule ``family:GLOB``) belongs to
FAMILIES = tuple(_OP_KINDS)
_FAMILY_OF_KIND = np.full(256, -1, dtype=np.int8)  # Kind code → family of CPU-side names (int8 codes index it)
_FAMILY_OF_KIND[int(Kind.CPU_OP)] = 1
_FAMILY_OF_KIND[[int(Kind.USER_ANNOTATION), int(Kind.GPU_ANNOTATION)]] = 2


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


# ----------------------------------------------------------------------------------------- one side
def _steps_of(view: JobView, wanted: Optional[Sequence[int]]) -> list:
    have = steps.profiler_steps(view)
    if wanted is None:
        return have
    missing = [s for s in wanted if s not in have]
    if missing:
        raise AnalysisError(f"steps {missing} are not in the job", fix=f"choose among {have}")
    return list(wanted)


def _step_pos(it: np.ndarray, step_list: list) -> np.ndarray:
    """Position in ``step_list`` of each iteration (−1: not a compared step; the first position of a step listed
    twice). Integer iterations read a table over the step numbers; others are searched."""
    sl = np.asarray(step_list, dtype=np.int64)
    # (a table no larger than a few times the rows: a step number read from the trace never sizes an allocation)
    if it.dtype.kind in "iu" and len(sl) and 0 <= sl.min() and sl.max() <= 4 * (len(it) + len(sl)) + 1024:
        u, first = np.unique(sl, return_index=True)
        lut = np.full(int(u[-1]) + 2, -1, dtype=np.int64)  # the last entry: any iteration outside the steps
        lut[u] = first
        x = it.astype(np.int64, copy=False)
        return lut[np.where((x >= 0) & (x <= u[-1]), x, len(lut) - 1)]
    order = np.argsort(np.asarray(step_list, dtype=np.int64), kind="stable")
    ss = np.asarray(step_list, dtype=np.float64)[order]
    at = np.minimum(np.searchsorted(ss, it), len(ss) - 1)
    return np.where(ss[at] == it, order[at], -1)


def _take(v: RankView, rows: np.ndarray) -> RankView:
    """``take_rows`` for a few rows of a large rank: ``partner`` renumbered by a search in ``rows``; the other
    columns taken when an analysis first reads them (a column no metric reads is neither taken nor made on the
    rank). ``row`` is taken at once: it tells :meth:`RankView.arg` which model rows the cell holds."""
    src = v.cols
    p = src["partner"][rows]
    at = np.minimum(np.searchsorted(rows, p), len(rows) - 1)
    full = isinstance(src, Columns) and not src.is_made("row")  # (the rank's rows are the model's, in order)
    made = {
        "partner": np.where((p >= 0) & (rows[at] == p), at, -1),
        "row": rows.astype(np.int64) if full else src["row"][rows],
    }
    makers = {k: (lambda k=k: src[k][rows]) for k in src if k not in made}
    return RankView(v.rank, Columns(made, makers, list(src)), v.model, v.clock_offset)


def _cells(view: JobView, step_list: list) -> tuple[JobView, np.ndarray]:
    """The view cut into one cell per (rank, step), each cell a "rank" of the returned view, and the step
    position of each cell. A cell holds the step's GPU work and the rows linked to it (its launch calls):
    every row the per-step metrics read, so that each analysis runs once over all cells."""
    cells, where = {}, []
    for r in view.ranks:
        v = view[r]
        g = np.flatnonzero(v["gpu"])
        pos = _step_pos(v["iteration"][g], step_list)
        g, pos = g[pos >= 0], pos[pos >= 0]
        p = v["partner"][g]
        linked = p >= 0
        rows = np.concatenate([g, p[linked]])
        step = np.concatenate([pos, pos[linked]])
        order = np.lexsort((rows, step))
        rows, step = rows[order], step[order]
        cut = np.flatnonzero(np.diff(step)) + 1
        for part, sp in zip(np.split(rows, cut), np.split(step, cut)):
            if len(part):
                rows_u = part[np.concatenate([[True], part[1:] != part[:-1]])]  # a row linked twice: once
                cells[len(where)] = _take(v, rows_u)
                where.append(int(sp[0]))
    return (
        JobView(cells, view.strings, view.rules, view.unit_ns, view.include_last_step),
        np.asarray(where, dtype=np.int64),
    )


def _per_step_metrics(view: JobView, step_list: list) -> pd.DataFrame:
    """One row per step (or one for the whole job when it has no steps) of every metric."""
    n_ranks = max(len(view.ranks), 1)
    if step_list:
        cv, where = _cells(view, step_list)
        n = len(step_list)
    else:  # the whole trace is one step: each rank is one cell
        cv, where, n = view, np.zeros(len(view.ranks), dtype=np.int64), 1
    of = {c: int(w) for c, w in zip(cv.ranks, where)}

    def per_step(frame: pd.DataFrame, col: str) -> np.ndarray:
        if not len(frame):
            return np.zeros(n)
        at = np.asarray([of[c] for c in frame["rank"].tolist()], dtype=np.int64)
        return np.bincount(at, weights=frame[col].to_numpy(np.float64), minlength=n)

    have = len(cv.ranks) > 0
    tb = temporal.breakdown(cv) if have else pd.DataFrame({"rank": [], "span_us": []})
    span = per_step(tb, "span_us")
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = (
            {
                c: np.where(span > 0, 100.0 * per_step(tb, f"{c}_us") / np.where(span > 0, span, 1), np.nan)
                for c in ("idle", "compute", "non_compute")
            }
            if have
            else {c: np.full(n, np.nan) for c in ("idle", "compute", "non_compute")}
        )
        ib = idle.idle_breakdown(cv) if have else None
        cause = {
            c: (per_step(ib[ib["idle_category"] == c], "idle_us") if have else np.zeros(n)) / n_ranks
            for c in idle.CATEGORIES
        }
        ov = overlap.comm_comp_overlap(cv) if have else None
        comm = per_step(ov, "comm_us") if have else np.zeros(n)
        ovl = np.where(
            comm > 0, 100.0 * (per_step(ov, "overlap_us") if have else comm) / np.where(comm > 0, comm, 1), np.nan
        )
    ls = launches.launch_stats(cv) if have else {}
    delays = [[] for _ in range(n)]
    for c, d in ls.items():
        delays[of[c]].append(d["launch_delay"].to_numpy())
    delay = np.asarray([float(np.median(np.concatenate(d))) if d and sum(map(len, d)) else np.nan for d in delays])
    if step_list:
        st = steps.step_times(view)
        means = st.groupby("step")["dur_us"].mean()
        step_time = np.asarray([float(means.get(s, np.nan)) for s in step_list])
    else:
        tb_all = temporal.breakdown(view)
        step_time = np.asarray([float(tb_all["span_us"].mean()) if len(tb_all) else np.nan])
    return pd.DataFrame(
        {
            "step": np.asarray(step_list if step_list else [-1], dtype=np.int64),
            "step_time": step_time,
            "idle": pct["idle"],
            "compute": pct["compute"],
            "non_compute": pct["non_compute"],
            "host_wait": cause["host_wait"],
            "kernel_wait": cause["kernel_wait"],
            "other_idle": cause["other"],
            "overlap": ovl,
            "launch_delay": delay,
        }
    )


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


class _Ops(NamedTuple):
    """Every kernel / operator / annotation instance of one side, keyed by (family, normalised name)."""

    key: np.ndarray  # int64: row of ``keys``
    rank: np.ndarray  # int64: position of the rank in ``ranks``
    step: np.ndarray  # int64: position of the step in the compared steps
    dur: np.ndarray  # the view's unit
    us: object  # the view's conversion to µs
    keys: pd.DataFrame  # family, key
    names: pd.DataFrame  # family, key, raw: the distinct raw names of each key
    ranks: list


def _op_rows(view: JobView, step_list: list, how: str) -> _Ops:
    parts = []
    for k, r in enumerate(view.ranks):
        v = view[r]
        fam = _FAMILY_OF_KIND[v["kind"]]
        for rows, f in ((np.flatnonzero(v["gpu"]), None), (np.flatnonzero(fam >= 0), fam)):
            parts.append(
                (
                    np.zeros(len(rows), np.int64) if f is None else f[rows].astype(np.int64),
                    v["name"][rows],
                    np.full(len(rows), k, dtype=np.int64),
                    v["iteration"][rows],
                    v["dur"][rows],
                )
            )
    fam, name, rank, it, dur = (
        np.concatenate([p[i] for p in parts]) if parts else np.empty(0, np.int64) for i in range(5)
    )
    step = _step_pos(it, step_list) if step_list else np.zeros(len(it), dtype=np.int64)
    if step_list:
        keep = np.flatnonzero(step >= 0)
        fam, name, rank, step, dur = fam[keep], name[keep], rank[keep], step[keep], dur[keep]
    code = (name.astype(np.int64) + 1) * 3 + fam  # distinct (name, family): by a table over the job's strings
    present = np.zeros(3 * (len(view.strings) + 1), dtype=bool)
    present[code] = True
    pairs = np.flatnonzero(present)
    slot = np.full(len(present), -1, dtype=np.int64)
    slot[pairs] = np.arange(len(pairs))
    p_fam, p_name = pairs % 3, pairs // 3 - 1
    raw = view.names(p_name)
    keys = _normalise(raw, how)
    keys = np.asarray(
        [
            "ProfilerStep#N" if profiler_step_number(s) >= 0 else s  # steps are matched by position
            for s in keys.tolist()
        ],
        dtype=object,
    )
    families = np.asarray(list(_OP_KINDS), dtype=object)[p_fam]
    key_of: dict = {}
    key_id = np.asarray(
        [key_of.setdefault((f, s), len(key_of)) for f, s in zip(families.tolist(), keys.tolist())], dtype=np.int64
    )
    table = pd.DataFrame(list(key_of), columns=["family", "key"]) if key_of else pd.DataFrame({"family": [], "key": []})
    names = pd.DataFrame({"family": families, "key": keys, "raw": raw})
    return _Ops(key_id[slot[code]] if len(code) else code, rank, step, dur, view.us, table, names, list(view.ranks))


def _op_stats(o: _Ops, n_steps: int) -> pd.DataFrame:
    """Per (family, key, rank) and merged (rank −1): count, totals, instance statistics, per-step spread."""
    n_ranks = max(len(o.ranks), 1)
    frames = []
    fine = None  # the per-rank groups sorted: the merged groups' order is made from it
    for group, per_rank in ((o.key * n_ranks + o.rank, True), (o.key, False)):
        fine = sort_groups(group, o.dur) if fine is None else coarser(*fine, n_ranks)
        uniq, count, total, mean, p50, p95, per_step = group_stats(group, o.dur, o.step, n_steps, fine)
        total, mean, p50, p95, per_step = (o.us(a) for a in (total, mean, p50, p95, per_step))
        key = uniq // n_ranks if per_rank else uniq
        div = 1 if per_rank else n_ranks
        sigma = per_step.std(axis=1, ddof=1) / div if n_steps > 1 else np.zeros(len(uniq))
        frames.append(
            pd.DataFrame(
                {
                    "family": o.keys["family"].to_numpy()[key],
                    "key": o.keys["key"].to_numpy()[key],
                    "rank": np.asarray(o.ranks, dtype=np.int64)[uniq % n_ranks] if per_rank else np.full(len(uniq), -1),
                    "count": count.astype(np.int64),
                    "total_us": total,
                    "mean_us": mean,
                    "p50_us": p50,
                    "p95_us": p95,
                    "per_step_us": total / n_steps / div,
                    "per_step_sigma": sigma,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------------------- the diff
def diff_jobs(
    base,
    new,
    *,
    rules: Optional[RuleSet] = None,
    base_steps: Optional[Sequence[int]] = None,
    new_steps: Optional[Sequence[int]] = None,
    ranks: Optional[Sequence[int]] = None,
    normalize: str = "none",
) -> JobDiff:
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
        v = views[0] if views and src is base else job_view(src, rules)  # one job twice: one view
        if ranks is not None:  # a subset of the ranks: their views as they are
            v = JobView({r: v[r] for r in v.select(ranks)}, v.strings, v.rules, v.unit_ns, v.include_last_step)
        views.append(v)
    bsteps, nsteps = _steps_of(views[0], base_steps), _steps_of(views[1], new_steps)
    notes = []
    if views[0].ranks != views[1].ranks:
        notes.append(
            f"different ranks: base has {views[0].ranks}, new has {views[1].ranks}; merged figures "
            f"are per rank on average"
        )
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
    ops = _join_ops(*(_op_stats(d, max(len(s), 1)) for d, s in zip(o, (bsteps, nsteps))))
    kb, kn = (set(d.names.loc[d.names["family"] == "kernel", "raw"].tolist()) for d in o)
    if kb and kn and len(kb & kn) < 0.3 * min(len(kb), len(kn)):
        notes.append(
            f"only {len(kb & kn)} of {len(kb)} base / {len(kn)} new kernel names are shared: are these the same model?"
        )
    merged = _merged_names(pd.concat([d.names for d in o], ignore_index=True))
    contrib = _contributors(ops, metrics)
    return JobDiff(metrics, ops, contrib, merged, notes, bsteps, nsteps, (tuple(views[0].ranks), tuple(views[1].ranks)))


def _metric_row(name: str, unit: str, b: pd.Series, n: pd.Series) -> dict:
    bm, nm = float(b.mean()), float(n.mean())
    return {
        "metric": name,
        "unit": "%" if unit == "pct" else "us",
        "base": bm,
        "new": nm,
        "delta": nm - bm,
        "delta_pct": 100.0 * (nm - bm) / abs(bm) if bm else np.nan,
        "base_sigma": float(b.std(ddof=1)) if b.notna().sum() > 1 else 0.0,
        "new_sigma": float(n.std(ddof=1)) if n.notna().sum() > 1 else 0.0,
    }


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
    cols = key + [
        "status",
        "count_base",
        "count_new",
        "total_us_base",
        "total_us_new",
        "mean_us_base",
        "mean_us_new",
        "p50_us_base",
        "p50_us_new",
        "p95_us_base",
        "p95_us_new",
        "per_step_us_base",
        "per_step_us_new",
        "per_step_sigma_base",
        "delta_per_step_us",
        "delta_pct",
    ]
    size = np.round(out["delta_per_step_us"].abs().to_numpy(), 6)  # to the ps: summation order makes no order
    order = np.lexsort(
        (out["family"].to_numpy().astype(str), out["key"].to_numpy().astype(str), -size, out["rank"].to_numpy())
    )
    return out[cols].iloc[order].reset_index(drop=True)


def _merged_names(df: pd.DataFrame) -> pd.DataFrame:
    pairs = df[["family", "key", "raw"]].drop_duplicates()
    n = pairs.groupby(["family", "key"])["raw"].transform("size")
    return pairs[n.to_numpy() > 1].sort_values(["family", "key", "raw"]).reset_index(drop=True)


def _contributors(ops: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """Merged kernels and idle causes by how much they changed a step of a rank (largest change first)."""
    k = ops[(ops["rank"] == -1) & (ops["family"] == "kernel")]
    items = [
        ("kernel:" + k["key"].astype(str)).to_numpy(),
        np.asarray([f"idle:{c}" for c in ("host_wait", "kernel_wait", "other_idle")], dtype=object),
    ]
    m = metrics.set_index("metric")
    causes = m.loc[["host_wait", "kernel_wait", "other_idle"]]
    out = pd.DataFrame(
        {
            "item": np.concatenate(items),
            "base_us": np.concatenate([k["per_step_us_base"].to_numpy(), causes["base"].to_numpy()]),
            "new_us": np.concatenate([k["per_step_us_new"].to_numpy(), causes["new"].to_numpy()]),
            "base_sigma_us": np.concatenate([k["per_step_sigma_base"].to_numpy(), causes["base_sigma"].to_numpy()]),
        }
    )
    out["delta_us"] = out["new_us"] - out["base_us"]
    out = out[out["delta_us"].fillna(0) != 0]
    order = np.lexsort((out["item"].to_numpy().astype(str), -out["delta_us"].abs().to_numpy()))
    return out.iloc[order].reset_index(drop=True)
