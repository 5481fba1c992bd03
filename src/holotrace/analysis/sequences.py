"""Frequent GPU kernel sequences under an operator (spec 23 §3).

A *pattern* is the name of a root operator followed by the names of every
GPU kernel launched beneath one instance of it (directly or through nested
calls), in start-time order. Identical patterns are counted, with the summed
kernel time and the summed root duration.

Root selection:

* ``"outermost"`` (holotrace): every event whose name matches and that has no
  matching ancestor, and at least ``min_pattern_len`` kernels below it;
* ``"hta"`` (HTA, the default under ``rules.hta_quirks``): only the matching
  events at the single shallowest depth among all matches (spec 23 §3.4
  "min-depth rule").

One path for every caller: :func:`frequent_kernel_sequences` reads one rank of a
:class:`~holotrace.model.view.JobView` and its call graph
(:func:`holotrace.analysis.callstack.call_graph`, which also works on the traces
where HTA's builder raises); names are matched and decoded once per distinct id.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.analysis.callstack import CallGraph, call_graph
from holotrace.errors import AnalysisError
from holotrace.model.classify import RuleSet
from holotrace.model.link import isin_ids
from holotrace.model.view import JobView, resolve

__all__ = [
    "PATTERN_COLUMNS",
    "SequenceResult",
    "empty_patterns",
    "frequent_kernel_sequences",
    "kernel_sequences",
    "match_names",
    "overlay_patterns",
    "write_overlay",
    "write_overlaid_trace",
]

PATTERN_COLUMNS = ["pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)"]


@dataclass
class SequenceResult:
    """Patterns and where they occur.

    Attributes:
        patterns: ``pattern, count, GPU kernel duration (us), CPU op duration (us)``,
            sorted by ``count`` descending then ``pattern`` ascending, ``RangeIndex``.
        occurrences: per pattern string, the event ``index`` values (CPU events and
            kernels) of every instance's subtree.
        roots: per pattern string, the row positions (in the rank's view) of its root events.
    """

    patterns: pd.DataFrame
    occurrences: dict[str, np.ndarray] = field(default_factory=dict)
    roots: dict[str, np.ndarray] = field(default_factory=dict)


def empty_patterns() -> pd.DataFrame:
    """The pattern frame with no rows (columns and dtypes as a full one)."""
    return pd.DataFrame(
        {
            "pattern": pd.Series([], dtype=object),
            "count": pd.Series([], dtype=np.int64),
            "GPU kernel duration (us)": pd.Series([], dtype=np.float64),
            "CPU op duration (us)": pd.Series([], dtype=np.float64),
        }
    )


def match_names(view: JobView, ids: np.ndarray, operator: str, how: str = "substring") -> np.ndarray:
    """Rows whose name (an id into ``view.strings``) matches ``operator``; −1 never matches.

    Args:
        view: the job's view (its string table).
        ids: name ids per row.
        operator: the text to look for.
        how: ``"substring"`` (HTA: the name contains ``operator``, case-sensitive),
            ``"exact"`` or ``"regex"`` (``re.search``).

    Returns:
        bool per row (the test runs once per string of the table).
    """
    if how == "substring":
        test = lambda s: operator in s  # noqa: E731
    elif how == "exact":
        test = {operator}
    elif how == "regex":
        try:
            test = re.compile(operator).search
        except re.error as e:
            raise AnalysisError(
                f"operator pattern {operator!r} is not a valid regular expression ({e})",
                fix="escape special characters such as ( [ * + ?, or match as a substring",
            ) from None
    else:
        raise ValueError(f"unknown match mode {how!r}; use substring, exact or regex")
    hit = view.name_ids(test)
    return isin_ids(np.asarray(ids), hit) if len(hit) else np.zeros(len(ids), dtype=bool)


def frequent_kernel_sequences(
    source,
    operator: str,
    *,
    rules: Optional[RuleSet] = None,
    rank: Optional[int] = None,
    min_pattern_len: int = 3,
    match: str = "substring",
    roots: Optional[str] = None,
    graph: Optional[CallGraph] = None,
) -> SequenceResult:
    """The kernel patterns under the operators of one rank that match ``operator`` (every step kept
    under holotrace's rules; HTA's view drops the last step unless built with it).

    Args:
        source: a Job or a JobView.
        operator: operator (or user annotation) name to look for.
        rules: the rule set (default holotrace's, or the view's).
        rank: the rank (default: the lowest).
        min_pattern_len: least number of GPU operations below a root.
        match: ``substring`` (HTA), ``exact`` or ``regex``.
        roots: ``outermost`` or ``hta`` (default: ``hta`` under ``rules.hta_quirks``, else ``outermost``).
        graph: the rank's call graph under ``rules`` when the caller keeps one (built otherwise).

    Returns:
        A :class:`SequenceResult`; durations in µs.
    """
    r = int(source.ranks[0]) if rank is None else int(rank)
    view = resolve(source, rules, ranks=[r])
    rules = view.rules
    rv = view[r]
    if graph is None:
        graph = call_graph(view, r, rules=rules)
    cand = match_names(view, rv["name"], operator, match)
    return kernel_sequences(
        view, r, graph, cand, min_pattern_len, roots or ("hta" if rules.hta_quirks else "outermost")
    )


def kernel_sequences(
    view: JobView,
    rank: int,
    graph: CallGraph,
    candidates: np.ndarray,
    min_pattern_len: int = 3,
    roots: str = "outermost",
) -> SequenceResult:
    """Count the kernel patterns below the candidate roots of one rank.

    Args:
        view, rank: the rank's events.
        graph: its call graph (rows = the view's rows).
        candidates: bool per row, the rows whose name matches the operator.
        min_pattern_len: least number of kernels below a root.
        roots: ``"outermost"`` or ``"hta"`` (see module docstring).

    Returns:
        A :class:`SequenceResult` (empty frame when no root qualifies).
    """
    if roots not in ("outermost", "hta"):
        raise ValueError(f"unknown root rule {roots!r}; use outermost or hta")
    cand = np.flatnonzero(candidates)
    if cand.size == 0:
        return SequenceResult(empty_patterns())
    enough = graph.num_kernels >= min_pattern_len
    if roots == "hta":
        d_min = graph.depth[cand].min()
        root_rows = cand[(graph.depth[cand] == d_min) & enough[cand]]
    else:
        covered = graph.ancestors_matching(candidates)
        root_rows = cand[~covered[cand] & enough[cand]]
    if root_rows.size == 0:
        return SequenceResult(empty_patterns())

    rv = view[rank]
    ts, index = rv["ts"], rv["index"]
    label = graph.subtree_labels(root_rows)
    # kernels of each root's subtree, in start-time order (ties: event id)
    krows = np.flatnonzero(graph.is_kernel & (label >= 0))
    krows = krows[np.lexsort((index[krows], ts[krows], label[krows]))]
    joined = pd.Series(view.names(rv["name"][krows]), dtype=object).groupby(label[krows], sort=False).agg("|".join)
    tails = joined.reindex(root_rows)
    has = tails.notna().to_numpy()
    pattern = view.names(rv["name"][root_rows]).astype(object)
    pattern[has] = pattern[has] + "|" + tails.to_numpy(dtype=object)[has]
    per_root = pd.DataFrame(
        {
            "pattern": pattern,
            "gpu": view.us(graph.kernel_dur_sum[root_rows]),
            "cpu": view.us(np.nan_to_num(rv["dur"][root_rows].astype(np.float64))),
            "root": root_rows,
        }
    )
    agg = per_root.groupby("pattern", sort=True).agg(count=("root", "size"), gpu=("gpu", "sum"), cpu=("cpu", "sum"))
    out = pd.DataFrame(
        {
            "pattern": agg.index.to_numpy(dtype=object),
            "count": agg["count"].to_numpy(dtype=np.int64),
            "GPU kernel duration (us)": agg["gpu"].to_numpy(dtype=np.float64),
            "CPU op duration (us)": agg["cpu"].to_numpy(dtype=np.float64),
        }
    )
    out = out.sort_values(["count", "pattern"], ascending=[False, True], kind="stable", ignore_index=True)

    # occurrences: every row labelled with a root, grouped by the root's pattern
    code_of_root = np.full(len(label), -1, dtype=np.int64)
    pat_codes, pat_uniques = pd.factorize(per_root["pattern"], sort=False)
    code_of_root[root_rows] = pat_codes
    rows = np.flatnonzero(label >= 0)
    row_codes = code_of_root[label[rows]]
    order = np.argsort(row_codes, kind="stable")
    rows, row_codes = rows[order], row_codes[order]
    splits = np.flatnonzero(np.diff(row_codes)) + 1
    occ: dict[str, np.ndarray] = {}
    for chunk in np.split(np.arange(rows.size), splits):  # one chunk per pattern
        if chunk.size:
            occ[str(pat_uniques[row_codes[chunk[0]]])] = index[rows[chunk]]
    root_map = {str(p): root_rows[pat_codes == i] for i, p in enumerate(pat_uniques)}
    return SequenceResult(out, occ, root_map)


def write_overlay(result: SequenceResult, file, output_dir, top_k: int, *, strings=None) -> Path:
    """Write the rank's trace with its ``top_k`` patterns marked into ``output_dir`` (see
    :func:`write_overlaid_trace`); with ``strings`` (the job's string table) every other complete
    event is compressed to its string id."""
    ids = {s: i for i, s in enumerate(strings.table)} if strings is not None else None
    k = min(int(top_k), len(result.patterns))
    return write_overlaid_trace(
        file, output_dir, overlay_patterns(result, k), compress_other_kernels=strings is not None, symbol_ids=ids
    )


def overlay_patterns(result: SequenceResult, top_k: int) -> dict[int, dict[str, int]]:
    """For the ``top_k`` most frequent patterns, the patterns each event belongs to.

    Returns:
        ``{event index: {pattern: count, ...}}``.
    """
    top = result.patterns.head(max(int(top_k), 0))
    if top.empty:
        return {}
    idx_parts = []
    pat_parts = []
    for i, p in enumerate(top["pattern"].tolist()):
        ev = result.occurrences.get(p, np.zeros(0, dtype=np.int64))
        idx_parts.append(ev)
        pat_parts.append(np.full(ev.size, i, dtype=np.int64))
    ev = np.concatenate(idx_parts)
    pi = np.concatenate(pat_parts)
    order = np.lexsort((pi, ev))
    ev, pi = ev[order], pi[order]
    names = top["pattern"].tolist()
    counts = top["count"].astype(int).tolist()
    out: dict[int, dict[str, int]] = {}
    for e, p in zip(ev.tolist(), pi.tolist()):  # one entry per (event, pattern) written out
        out.setdefault(e, {})[names[p]] = counts[p]
    return out


def _read_json(path: Path):
    import msgspec

    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return msgspec.json.decode(raw)


class _NoGC:
    """Pause the cyclic garbage collector while millions of small objects are built (4x faster)."""

    def __enter__(self):
        import gc

        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        import gc

        if self._was:
            gc.enable()


def write_overlaid_trace(
    src: str | Path,
    output_dir: str | Path,
    event_patterns: Mapping[int, Mapping[str, int]],
    *,
    compress_other_kernels: bool = True,
    symbol_ids: Mapping[str, int] | None = None,
) -> Path:
    """Write ``overlaid_<file name>`` into ``output_dir``; the input file is never touched.

    Every event whose position in ``traceEvents`` is a key of ``event_patterns``
    gets ``args["Patterns"]``. With ``compress_other_kernels`` every other
    complete (``ph == "X"``) event loses its ``args`` and its name is replaced
    by the decimal id from ``symbol_ids``; the ``PyTorch Profiler`` span event
    then carries the id → name table so the names can be decoded.

    The file is gzip-compressed when the source file name ends in ``.gz``
    (HTA always gzips, whatever the name says).

    Returns:
        The path written.
    """
    with _NoGC():
        return _write_overlaid_trace(Path(src), Path(output_dir), event_patterns, compress_other_kernels, symbol_ids)


def _write_overlaid_trace(
    src: Path, output_dir: Path, event_patterns, compress_other_kernels: bool, symbol_ids
) -> Path:
    out = output_dir / ("overlaid_" + src.name)
    doc = _read_json(src)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    ids = dict(symbol_ids or {})
    spans = (
        [
            pos
            for pos, ev in enumerate(events)
            if isinstance(ev, dict) and ev.get("pid") == "Spans" and "PyTorch Profiler" in str(ev.get("name", ""))
        ]
        if compress_other_kernels
        else []
    )
    for pos, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue
        pats = event_patterns.get(pos)
        if pats is not None:
            args = ev.get("args")
            if not isinstance(args, dict):
                args = {}
            args = dict(args)
            args["Patterns"] = dict(pats)
            ev["args"] = args
        elif compress_other_kernels and ev.get("ph") == "X":
            ev["args"] = {}
            name = ev.get("name")
            if isinstance(name, str) and name in ids:
                ev["name"] = str(ids[name])
    for pos in spans:
        events[pos]["args"] = {str(i): s for s, i in ids.items()}
    import msgspec

    data = msgspec.json.encode(doc)
    if src.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=1)
    from holotrace.atomic import write_bytes

    write_bytes(out, data)
    return out
