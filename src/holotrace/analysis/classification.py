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

from holotrace.analysis.grouped import group_count, group_first_row, group_sum, unique_ids
from holotrace.model.classify import NATIVE, KernelType, RuleSet
from holotrace.model.rule_table import CommKind
from holotrace.model.view import job_view
from holotrace.table import Table

__all__ = ["kernel_rules", "kernel_rules_table", "op_rules", "op_rules_table", "unclaimed_share", "EVIDENCE"]

EVIDENCE = ("name", "launched under", "no rule")
_KERNEL_COLUMNS = ["name", "kernel_type", "comm_kind", "rule", "evidence", "under", "count", "time_us", "share"]
_OP_COLUMNS = ["name", "comm_kind", "rule", "count", "time_us"]


def _kind_label(code: int) -> str:
    return CommKind(int(code)).label if code >= 0 else ""


def _rule_label(table, rid: int) -> str:
    return table.rules[int(rid)].label if rid >= 0 and table is not None else "-"


def _groups(keys: list[np.ndarray], dur: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(first row, count, summed dur)`` of each group of equal ``keys``, groups in order of first appearance,
    as pandas' ``groupby(keys, sort=False)["dur"].agg(["count", "sum"])`` (the sums compensated, in row order)."""
    code = np.zeros(len(dur), dtype=np.int64)
    for k in keys:  # one code per distinct combination so far, kept below the number of rows
        ku, kc = unique_ids(k)
        code = unique_ids(code * len(ku) + kc)[1]
    n = int(code.max()) + 1 if len(code) else 0
    first = group_first_row(code, n)
    order = np.argsort(first, kind="stable")
    return first[order], group_count(code, n, dur)[order], group_sum(code, dur, n)[order]


def _by_time(time_us: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Rows by time descending, then name ascending, then as they are (a stable sort)."""
    name_rank = np.unique(names, return_inverse=True)[1].reshape(-1) if len(names) else np.empty(0, dtype=np.int64)
    return np.lexsort((name_rank, -time_us))


def kernel_rules(source, *, rules: RuleSet = NATIVE, ranks: Optional[Sequence[int]] = None):
    """:func:`kernel_rules_table` as a pandas frame."""
    return kernel_rules_table(source, rules=rules, ranks=ranks).to_pandas()


def kernel_rules_table(source, *, rules: RuleSet = NATIVE, ranks: Optional[Sequence[int]] = None) -> Table:
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
        parts.append((v["name"][g], v["kernel_type"][g], v["comm_kind"][g], v["rule"][g], under, view.us(v["dur"][g])))
    if not parts:
        return Table(
            {
                c: np.empty(0, dtype=np.float64 if c in ("time_us", "share") else np.int64 if c == "count" else object)
                for c in _KERNEL_COLUMNS
            }
        )
    name_id, ktype, kind, rid, under_id, dur = (np.concatenate(c) for c in zip(*parts))
    dur = np.asarray(dur, dtype=np.float64)
    table = view.table
    on_op = np.array([r.on == "op" for r in table.rules] if table is not None else [], dtype=bool)
    by_op = (rid >= 0) & (on_op[np.clip(rid, 0, None)] if len(on_op) else False)
    how = np.where(rid < 0, 2, np.where(by_op, 1, 0))
    under_id = np.where(how == 1, under_id, -1)
    first, count, time_us = _groups([name_id, ktype, kind, rid, how, under_id], dur)
    total = float(np.nansum(dur))  # pandas' Series.sum
    names = view.names(name_id[first])
    order = _by_time(time_us, names)
    first, count, time_us, names = first[order], count[order], time_us[order], names[order]
    return Table(
        {
            "name": names,
            "kernel_type": [KernelType(int(t)).name for t in ktype[first].tolist()],
            "comm_kind": [_kind_label(k) for k in kind[first].tolist()],
            "rule": [_rule_label(table, rid) for rid in rid[first].tolist()],
            "evidence": [EVIDENCE[int(h)] for h in how[first].tolist()],
            "under": view.names(under_id[first]),
            "count": count.astype(np.int64),
            "time_us": time_us,
            "share": 100.0 * time_us / total if total > 0 else np.zeros(len(time_us)),
        }
    )


def op_rules(source, *, rules: RuleSet = NATIVE, ranks: Optional[Sequence[int]] = None):
    """:func:`op_rules_table` as a pandas frame."""
    return op_rules_table(source, rules=rules, ranks=ranks).to_pandas()


def op_rules_table(source, *, rules: RuleSet = NATIVE, ranks: Optional[Sequence[int]] = None) -> Table:
    """CPU ops and annotations that op rules call collectives, by (name, kind, rule), largest CPU time first.

    Columns: ``name``, ``comm_kind``, ``rule``, ``count``, ``time_us`` (summed durations; nested ops both count).
    """
    view = job_view(source, rules)
    parts = []
    for r in view.select(ranks):
        v = view[r]
        c = np.flatnonzero(~v["gpu"] & (v["comm_kind"] >= 0))
        if len(c):
            parts.append((v["name"][c], v["comm_kind"][c], v["rule"][c], view.us(v["dur"][c])))
    if not parts:
        return Table(
            {
                c: np.empty(0, dtype=np.float64 if c == "time_us" else np.int64 if c == "count" else object)
                for c in _OP_COLUMNS
            }
        )
    name_id, kind, rid, dur = (np.concatenate(c) for c in zip(*parts))
    first, count, time_us = _groups([name_id, kind, rid], np.asarray(dur, dtype=np.float64))
    names = view.names(name_id[first])
    order = _by_time(time_us, names)
    first, count, time_us, names = first[order], count[order], time_us[order], names[order]
    return Table(
        {
            "name": names,
            "comm_kind": [_kind_label(k) for k in kind[first].tolist()],
            "rule": [_rule_label(view.table, r) for r in rid[first].tolist()],
            "count": count.astype(np.int64),
            "time_us": time_us,
        }
    )


def unclaimed_share(kernels) -> float:
    """The share (%) of GPU time that no rule claimed, from :func:`kernel_rules`' frame (or its table)."""
    if not len(kernels):
        return 0.0
    share = np.asarray(kernels["share"], dtype=np.float64)[np.asarray(kernels["evidence"], dtype=object) == "no rule"]
    return float(np.nansum(share))
