"""Which rule classified what: the job's GPU work by name with the rule that decided, and the CPU collectives.

* :func:`kernel_rules` — one row per (kernel name, type, collective kind, rule): count, GPU time and share,
  the rule's label (``family (file:line)``), how it was decided (``name``: a kernel rule matched the name;
  ``launched under``: the work was launched inside a collective op that an op rule matched; ``no rule``:
  nothing claimed it, so it is computation by default) and, for the second, the op's name.
* :func:`op_rules` — the CPU operators and annotations that op rules call collectives (``c10d::allreduce_``,
  ``gloo:all_reduce`` ...): count, CPU time, kind, rule. On a CPU-only job (Gloo) this is its communication.
* :func:`unclaimed_share` — the share of GPU time that no rule claimed.

Pure functions of a :class:`~holotrace.model.view.JobView` (or a ``Job``) under holotrace's rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.model.classify import NATIVE, KernelType, RuleSet
from holotrace.model.rule_table import CommKind
from holotrace.model.view import job_view

__all__ = ["kernel_rules", "op_rules", "unclaimed_share", "EVIDENCE"]

EVIDENCE = ("name", "launched under", "no rule")
_KERNEL_COLUMNS = ["name", "kernel_type", "comm_kind", "rule", "evidence", "under", "count", "time_us", "share"]
_OP_COLUMNS = ["name", "comm_kind", "rule", "count", "time_us"]


def _kind_label(code: int) -> str:
    return CommKind(int(code)).label if code >= 0 else ""


def _rule_label(table, rid: int) -> str:
    return table.rules[int(rid)].label if rid >= 0 and table is not None else "-"


def kernel_rules(source, *, rules: RuleSet = NATIVE, ranks: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """The job's GPU work grouped by (name, type, kind, rule), largest GPU time first (ties by name).

    Columns: ``name``, ``kernel_type`` (COMMUNICATION ...), ``comm_kind`` (``all_reduce`` ..., ``-`` unknown,
    ``""`` not communication), ``rule`` (``family (file:line)``, ``-`` none), ``evidence`` (one of
    :data:`EVIDENCE`), ``under`` (the collective op's name for ``launched under``), ``count``, ``time_us``
    (summed durations), ``share`` (of the job's GPU time, %).
    """
    view = job_view(source, rules)
    parts = []
    for r in view.select(ranks):
        v = view[r]
        g = np.flatnonzero(v["gpu"])
        if not len(g):
            continue
        op = v["comm_op"][g]
        under = np.where(op >= 0, v["name"][np.clip(op, 0, None)], -1)
        parts.append(
            pd.DataFrame(
                {
                    "name_id": v["name"][g],
                    "ktype": v["kernel_type"][g],
                    "kind": v["comm_kind"][g],
                    "rid": v["rule"][g],
                    "under_id": under,
                    "dur": view.us(v["dur"][g]),
                }
            )
        )
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype=np.float64 if c in ("time_us", "share") else object) for c in _KERNEL_COLUMNS}
        ).astype({"count": np.int64})
    df = pd.concat(parts, ignore_index=True)
    table = view.table
    by_op = (
        np.array(
            [rid >= 0 and table is not None and table.rules[rid].on == "op" for rid in df["rid"].tolist()], dtype=bool
        )
        if len(df)
        else np.zeros(0, bool)
    )
    df["how"] = np.where(df["rid"] < 0, 2, np.where(by_op, 1, 0))
    df["under_id"] = np.where(df["how"] == 1, df["under_id"], -1)
    g = df.groupby(["name_id", "ktype", "kind", "rid", "how", "under_id"], sort=False)["dur"].agg(["count", "sum"])
    g = g.reset_index()
    total = float(df["dur"].sum())
    out = pd.DataFrame(
        {
            "name": view.names(g["name_id"].to_numpy()),
            "kernel_type": [KernelType(int(t)).name for t in g["ktype"].tolist()],
            "comm_kind": [_kind_label(k) for k in g["kind"].tolist()],
            "rule": [_rule_label(table, rid) for rid in g["rid"].tolist()],
            "evidence": [EVIDENCE[int(h)] for h in g["how"].tolist()],
            "under": view.names(g["under_id"].to_numpy()),
            "count": g["count"].to_numpy(np.int64),
            "time_us": g["sum"].to_numpy(np.float64),
        }
    )
    out["share"] = 100.0 * out["time_us"] / total if total > 0 else 0.0
    return out.sort_values(["time_us", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)


def op_rules(source, *, rules: RuleSet = NATIVE, ranks: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """CPU ops and annotations that op rules call collectives, by (name, kind, rule), largest CPU time first.

    Columns: ``name``, ``comm_kind``, ``rule``, ``count``, ``time_us`` (summed durations; nested ops both count).
    """
    view = job_view(source, rules)
    parts = []
    for r in view.select(ranks):
        v = view[r]
        c = np.flatnonzero(~v["gpu"] & (v["comm_kind"] >= 0))
        if len(c):
            parts.append(
                pd.DataFrame(
                    {
                        "name_id": v["name"][c],
                        "kind": v["comm_kind"][c],
                        "rid": v["rule"][c],
                        "dur": view.us(v["dur"][c]),
                    }
                )
            )
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=np.float64 if c == "time_us" else object) for c in _OP_COLUMNS}).astype(
            {"count": np.int64}
        )
    df = pd.concat(parts, ignore_index=True)
    g = df.groupby(["name_id", "kind", "rid"], sort=False)["dur"].agg(["count", "sum"]).reset_index()
    out = pd.DataFrame(
        {
            "name": view.names(g["name_id"].to_numpy()),
            "comm_kind": [_kind_label(k) for k in g["kind"].tolist()],
            "rule": [_rule_label(view.table, rid) for rid in g["rid"].tolist()],
            "count": g["count"].to_numpy(np.int64),
            "time_us": g["sum"].to_numpy(np.float64),
        }
    )
    return out.sort_values(["time_us", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)


def unclaimed_share(kernels: pd.DataFrame) -> float:
    """The share (%) of GPU time that no rule claimed, from :func:`kernel_rules`' frame."""
    return float(kernels.loc[kernels["evidence"] == "no rule", "share"].sum()) if len(kernels) else 0.0
