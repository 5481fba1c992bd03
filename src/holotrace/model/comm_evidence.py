"""What each event of a rank is under a rule table: by its name, and by the collective it was launched under.

:func:`classify_rank` gives, for one rank's events:

* ``kernel_type`` — for GPU work, the type of the first kernel rule its name matches (computation if none),
  raised to COMMUNICATION where the work was launched under a CPU op or annotation that an op rule calls a
  collective (``c10d::allreduce_``, ``nccl:all_reduce``, ``gloo:*``, ``symm_mem::*``, ``vllm::all_reduce``,
  ``record_param_comms`` ...), unless a kernel rule said *computation* explicitly; −1 for other rows.
* ``comm_kind`` — the :class:`~holotrace.model.rule_table.CommKind` of communication rows (GPU work, and CPU ops
  that op rules call collectives, e.g. Gloo on a CPU-only job), −1 for the rest. A kernel whose own rule leaves the
  kind unknown takes the kind of the collective it was launched under.
* ``rule`` — the id (index into the table's ``rules``) of the rule that decided: the kernel rule, or for work
  raised by its launching op, the op rule; for CPU ops, the op rule they match; −1 none.
* ``comm_op`` — the position of the collective op a GPU row was launched under (its process group and size
  are that op's args), −1 none.

Everything is vectorised: names are classified once per distinct string, and the "launched under" test is one
interval-containment search over the matching ops of all threads at once (``numpy.searchsorted``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import numpy as np

from holotrace.model.rule_table import KIND_FROM_ARGS, CommKind, KernelType, RuleTable, kind_of_collective_name

_COMM, _MEMORY = int(KernelType.COMMUNICATION), int(KernelType.MEMORY)
_OPS = (1, 2)  # Kind.CPU_OP, Kind.USER_ANNOTATION (classify's codes)


def classify_rank(
    cols: Mapping[str, np.ndarray],
    strings,
    table: RuleTable,
    *,
    gpu: np.ndarray,
    collective_name: Optional[np.ndarray] = None,
    by_launch: bool = True,
) -> dict[str, np.ndarray]:
    """``kernel_type``, ``comm_kind``, ``rule``, ``comm_op`` of one rank (see the module docstring).

    ``cols`` holds the view's ``name``, ``kind``, ``pid``, ``tid``, ``ts``, ``end`` and ``partner``; ``gpu``
    selects the GPU work; ``collective_name`` (string ids) is read for ops whose rule takes the kind from args.
    ``by_launch=False`` classifies by name only (the HTA rule sets).
    """
    name = np.asarray(cols["name"])
    n = len(name)
    ktype = np.full(n, -1, dtype=np.int8)
    kind = np.full(n, -1, dtype=np.int8)
    rule = np.full(n, -1, dtype=np.int32)
    comm_op = np.full(n, -1, dtype=np.int32 if n < 2**31 else np.int64)  # (positions of the rank's events)
    g = np.flatnonzero(gpu)
    if len(g):
        t, k, r = _per_name(name[g], strings, table.classify_kernels)
        ktype[g], kind[g], rule[g] = t, k, r
    if not by_launch:
        return {"kernel_type": ktype, "comm_kind": kind, "rule": rule, "comm_op": comm_op}
    kinds = np.asarray(cols["kind"])
    ops = np.flatnonzero((kinds == _OPS[0]) | (kinds == _OPS[1]))  # (two comparisons: ~30x np.isin on int8)
    if len(ops):
        ok, orule = _per_name(name[ops], strings, table.classify_ops)
        hit = orule >= 0
        ops, ok, orule = ops[hit], ok[hit], orule[hit]
        if len(ops):
            ok = _kinds_from_args(ops, ok, strings, collective_name)
            kind[ops], rule[ops] = ok, orule
            _launched_under(cols, g, ops, ok, orule, table, ktype, kind, rule, comm_op)
    return {"kernel_type": ktype, "comm_kind": kind, "rule": rule, "comm_op": comm_op}


def _per_name(ids: np.ndarray, strings, classify) -> tuple:
    """``classify`` (a table method) once per distinct name id, gathered back to ``ids`` (ids are dense: a
    lookup array over the job's strings, no sort)."""
    n = len(strings)
    safe = np.where(ids >= 0, ids, n)  # id −1 (no name) reads the last slot
    present = np.zeros(n + 1, dtype=bool)
    present[safe] = True
    uniq = np.flatnonzero(present)
    parts = classify([strings[int(i)] if i < n else "" for i in uniq.tolist()])
    out = []
    for p in parts:
        lut = np.zeros(n + 1, dtype=p.dtype)
        lut[uniq] = p
        out.append(lut[safe])
    return tuple(out)


def _kinds_from_args(ops: np.ndarray, kinds: np.ndarray, strings, collective_name) -> np.ndarray:
    """Kinds of ops whose rule reads the ``Collective name`` argument (record_param_comms)."""
    kinds = kinds.copy()
    from_args = kinds == KIND_FROM_ARGS
    kinds[from_args] = int(CommKind.UNKNOWN)
    if from_args.any() and collective_name is not None:
        arg = np.asarray(collective_name)[ops[from_args]]
        uniq, inv = np.unique(arg, return_inverse=True)
        lut = np.array(
            [int(kind_of_collective_name(strings[int(i)])) if i >= 0 else 0 for i in uniq.tolist()], dtype=np.int8
        )
        kinds[from_args] = lut[inv.reshape(-1)]
    return kinds


def _launched_under(cols, g, ops, op_kind, op_rule, table: RuleTable, ktype, kind, rule, comm_op) -> None:
    """For GPU rows ``g`` launched (``partner``) from inside one of ``ops`` on the same thread: communication."""
    partner = np.asarray(cols["partner"])[g]
    launched = partner >= 0
    g, launch = g[launched], partner[launched]
    if not len(g):
        return
    pid, tid = np.asarray(cols["pid"]), np.asarray(cols["tid"])
    ts, end = np.asarray(cols["ts"]), np.asarray(cols["end"])
    op_thread = _thread_key(pid[ops], tid[ops])
    l_thread = _thread_key(pid[launch], tid[launch], like=(pid[ops], tid[ops]))
    rows_all, at_all = [], []
    # one pass per thread that has collective ops (a few), not per event: keys 0..k-1, each held by an op
    for t in range(int(op_thread.max()) + 1 if len(op_thread) else 0):
        o = np.flatnonzero(op_thread == t)
        li = np.flatnonzero(l_thread == t)
        if not len(li):
            continue
        o = o[np.argsort(ts[ops[o]], kind="stable")]
        start, stop = ts[ops[o]], end[ops[o]]
        run_end = np.maximum.accumulate(stop)  # the latest end among the ops started so far ...
        run_arg = np.maximum.accumulate(np.where(stop == run_end, np.arange(len(o)), 0))  # ... and which op it is
        lt = ts[launch[li]]
        i = np.searchsorted(start, lt, side="right") - 1  # the last op started at or before the launch
        ok = i >= 0
        i0 = np.where(ok, i, 0)
        direct = ok & (stop[i0] >= lt)  # the latest-started op holds it (the innermost)
        outer = ok & ~direct & (run_end[i0] >= lt)  # else an earlier, longer op on the thread does
        found = direct | outer
        rows_all.append(g[li[found]])
        at_all.append(o[np.where(direct, i0, run_arg[i0])[found]])
    if not rows_all:
        return
    rows, at = np.concatenate(rows_all), np.concatenate(at_all)  # GPU rows, and positions in ``ops``
    if not len(rows):
        return
    comm_op[rows] = ops[at]
    # raise to communication: unclaimed names and memory rules (a copy a collective makes), never a rule that
    # says computation; fill the kind of communication kernels whose own rule does not name one
    raise_ = (rule[rows] < 0) | (ktype[rows] == _MEMORY)
    up = rows[raise_]
    ktype[up] = _COMM
    kind[up] = op_kind[at[raise_]]
    rule[up] = op_rule[at[raise_]]
    fill = ~raise_ & (ktype[rows] == _COMM) & (kind[rows] == int(CommKind.UNKNOWN))
    kind[rows[fill]] = op_kind[at[fill]]


def _thread_key(pid: np.ndarray, tid: np.ndarray, like=None) -> np.ndarray:
    """One integer per (pid, tid) pair; with ``like``, keys of the pairs in ``like`` (others −1)."""
    ref_pid, ref_tid = (pid, tid) if like is None else like
    # the distinct pairs in (pid, tid) order (few: the threads that hold collective ops), as ``np.unique(...,
    # axis=0)`` gives them, from the runs of equal pairs (a sort of the runs, not of every row)
    ref_pid, ref_tid = np.asarray(ref_pid), np.asarray(ref_tid)
    new = np.ones(len(ref_pid), dtype=bool)
    new[1:] = (ref_pid[1:] != ref_pid[:-1]) | (ref_tid[1:] != ref_tid[:-1])
    pairs = sorted(set(zip(ref_pid[new].tolist(), ref_tid[new].tolist())))
    out = np.full(len(pid), -1, dtype=np.int64)
    for k, (p, t) in enumerate(pairs):
        out[(pid == p) & (tid == t)] = k
    return out
