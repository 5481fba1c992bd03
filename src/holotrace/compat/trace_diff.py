"""``TraceDiff`` and ``LabeledTrace``: HTA's comparison of two trace collections (spec 13).

An HTA notebook runs by changing its import line::

    # from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff
    from holotrace import DeviceType, LabeledTrace, TraceDiff

    TraceDiff.compare_traces("runs/control", "runs/test", device_type=DeviceType.GPU)

Columns, row order and categories are HTA 0.6.1's. Fixed on purpose (docs/compatibility.md):

* a ``LabeledTrace`` without a label is labelled ``t0``, ``t1``, ... in creation order (HTA draws
  ``t<random 0-10>``, so two traces can get the same label);
* a trace passed in is never re-parsed or modified: each side reads HTA's rows of the loaded job (every
  row, the last ``ProfilerStep`` included, as HTA's ``parse_traces``);
* ``<label>_counts`` and ``diff_counts`` are always int64 (HTA: float64 when the key sets differ);
* two equal labels make the test side ``<label>_test`` (HTA: ``<label>_control_test``; ``hta_compat=True``);
* ``rank=[1, 0]`` labels each row with its own rank (HTA mislabels them).

The counting itself is numpy over the HTA view's columns (one decode per distinct name).
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Optional, Union

import numpy as np
import pandas as pd

from holotrace.compat.hta_table import hta_table
from holotrace.compat.types import DeviceType
from holotrace.model.classify import HTA
from holotrace.model.view import JobView, job_view
from holotrace.text import hta_short_names as shorten_names

__all__ = ["DeviceType", "TraceDir", "LabeledTrace", "TraceDiff"]

log = logging.getLogger("holotrace.compat")

TraceDir = str


def _job_of(t):
    """A loaded job from what HTA code passes as ``t``: a ``Job``, a ``TraceAnalysis`` or a ``JobView``."""
    from holotrace.model.job import Job

    if isinstance(t, Job):
        return t
    job = getattr(t, "job", None)
    if isinstance(job, Job):
        return job
    raise ValueError(f"Invalid argument type for ({t!r}): pass a trace folder, a holotrace Job or a TraceAnalysis")


class LabeledTrace:
    """A loaded job with a label (HTA's wrapper of a ``Trace``).

    Args:
        label: the label of the columns; default: ``t<n>``, ``n`` counting unlabelled traces from 0.
        t: an already loaded job (:class:`holotrace.model.job.Job` or ``TraceAnalysis``); never modified.
        trace_dir: a folder of trace files (used when ``t`` is None).

    Attributes:
        label, t (the job), view (HTA's rows, last step included), s_map (symbol → id), s_tab (id → symbol),
        iteration_df (``symbol, id, iteration`` of the ``ProfilerStep#N`` names).
    """

    def __init__(
        self,
        label: Optional[str] = None,
        t=None,
        trace_dir: Optional[str] = None,
        *,
        cache: bool = True,
        workers: Optional[int] = None,
    ) -> None:
        if t is not None:
            self.t = _job_of(t)
        elif trace_dir is not None and Path(trace_dir).is_dir():
            from holotrace.loader import load

            self.t = load(trace_dir, cache=cache, workers=workers)
        else:
            raise ValueError("either a trace object or a valid trace dir must be provided in LabeledTrace.__init__()")
        self.label: str = label if label else _next_label()
        self.view: JobView = job_view(self.t, HTA, include_last_step=True)
        table = self.t.strings.table
        self.s_tab = pd.Series(table, dtype=object)
        self.s_map = pd.Series(np.arange(len(table), dtype=np.int64), index=pd.Index(table, dtype=object))
        self.iteration_df = self._extract_iterations()
        from holotrace.compat.trace import _min_ts

        self._offset = _min_ts(self.t)  # HTA's LabeledTrace parses without aligning: absolute times

    def _extract_iterations(self) -> pd.DataFrame:
        steps = self.view.per_string(HTA.step_number, prefix="ProfilerStep")[:-1]
        ids = np.flatnonzero(steps >= 0)
        return pd.DataFrame(
            {
                "symbol": pd.Series(self.t.strings.decode(ids), dtype=object),
                "id": ids.astype(np.int64),
                "iteration": steps[ids].astype(np.int64),
            }
        )

    def ranks(self) -> list[int]:
        """Sorted ranks."""
        return list(self.view.ranks)

    def iterations(self) -> list[int]:
        """Sorted ``ProfilerStep`` numbers of the job (every rank together)."""
        return sorted(self.iteration_df["iteration"].tolist())

    # ------------------------------------------------------------------ selection
    def _ranks(self, rank) -> list[int]:
        return self._choose(rank, self.ranks(), "rank", f"Invalid argument rank={rank}.")

    def _iterations(self, iteration) -> list[int]:
        return self._choose(iteration, self.iterations(), "iteration", None)

    def _choose(self, asked, have: list[int], what: str, bad: Optional[str]) -> list[int]:
        """HTA's selection rule: None → the first available; otherwise every asked value must exist."""
        if asked is None:
            if not have:
                raise ValueError(f"Trace {self.label} doesn't have any {what}.")
            return have[:1]
        chosen = _int_list(asked, what)
        for x in chosen:
            if x not in have:
                raise ValueError(bad or f"Invalid argument {what}={x}.")
        return chosen

    def _rows(self, rank: int, iterations: list[int], device_type: DeviceType) -> np.ndarray:
        v = self.view[rank]
        it = v["iteration"]
        keep = np.isin(it, np.asarray(iterations, dtype=it.dtype))  # NaN iterations never match
        if device_type == DeviceType.CPU:
            keep &= v["stream"] == -1
        elif device_type == DeviceType.GPU:
            keep &= v["stream"] != -1
        return np.flatnonzero(keep)

    def extract_ops(
        self,
        rank: Optional[Union[int, list[int]]] = None,
        iteration: Optional[Union[int, list[int]]] = None,
        device_type: DeviceType = DeviceType.ALL,
    ) -> pd.DataFrame:
        """HTA's rows of the ranks, iterations and device side (one rank: its frame's rows; several:
        with ``rank`` and ``idx`` columns)."""
        ranks, its = self._ranks(rank), self._iterations(iteration)
        parts = []
        for r in ranks:
            rows = self._rows(r, its, device_type)
            rows = rows[np.argsort(self.view[r]["index"][rows], kind="stable")]  # file order, as HTA's parse
            df = hta_table(self.view[r], self.t.strings, rows=rows).drop(columns=["s_name", "s_cat"])
            parts.append(df.assign(ts=df["ts"] + self._offset, end=df["end"] + self._offset))
        if len(ranks) == 1:
            return parts[0]
        return pd.concat(parts, keys=ranks, names=["rank", "idx"]).reset_index()

    def get_ops_summary(self, ops: pd.DataFrame) -> pd.DataFrame:
        """Counts and total duration (µs) per (category, name) of ``ops``, HTA's columns."""
        g = ops[["cat", "name", "dur"]].groupby(["cat", "name"])["dur"].agg(["count", "sum"]).reset_index()
        names = self.t.strings.decode(g["name"].to_numpy())
        return pd.DataFrame(
            {
                "cat": pd.Series(self.t.strings.decode(g["cat"].to_numpy()), dtype=object),
                "name": pd.Series(names, dtype=object),
                "short_name": pd.Series(shorten_names(names), dtype=object),
                "counts": g["count"].to_numpy(np.int64),
                "total_duration": g["sum"].to_numpy(),
                "cat_id": g["cat"].to_numpy(np.int64),
                "name_id": g["name"].to_numpy(np.int64),
            }
        )

    def _summary(self, rank, iteration, device_type: DeviceType, use_short_name: bool) -> pd.DataFrame:
        """``counts, total_duration`` per name (or short name), index sorted: the fast path of compare_traces."""
        ranks, its = self._ranks(rank), self._iterations(iteration)
        ids, durs = [], []
        for r in ranks:
            v = self.view[r]
            rows = self._rows(r, its, device_type)
            ids.append(v["name"][rows])
            durs.append(v["dur"][rows].astype(np.float64))
        ids, durs = np.concatenate(ids), np.concatenate(durs)
        uniq, inv = np.unique(ids, return_inverse=True)
        inv = inv.reshape(-1)
        counts = np.bincount(inv, minlength=len(uniq)).astype(np.int64)
        total = np.bincount(inv, weights=durs, minlength=len(uniq))
        keys = self.t.strings.decode(uniq)
        if use_short_name:
            keys = shorten_names(keys)
        df = pd.DataFrame({"counts": counts, "total_duration": total}, index=pd.Index(keys, dtype=object))
        if use_short_name or (uniq < 0).any():
            df = df.groupby(level=0, sort=False).sum()
        order = sorted(range(len(df)), key=lambda k: df.index[k])
        return df.iloc[order]


_unlabelled = itertools.count()


def _next_label() -> str:
    """HTA labels an unlabelled trace ``t<digits>``; here the digits count such traces in this process."""
    return f"t{next(_unlabelled)}"


def _int_list(x, what: str) -> list[int]:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return [int(x)]
    if isinstance(x, list):
        return [int(i) for i in x]
    raise ValueError(f"Invalid type for argument `{what}` {x}.")


def _adapt(t, default_label: str) -> LabeledTrace:
    if isinstance(t, LabeledTrace):
        return t
    if isinstance(t, (str, Path)):
        return LabeledTrace(label=default_label, trace_dir=str(t))
    try:
        return LabeledTrace(label=default_label, t=t)
    except ValueError:
        raise ValueError(f"Invalid argument type for ({t}).") from None


class TraceDiff:
    """HTA's comparison of operator/kernel counts and total durations between two trace collections."""

    @classmethod
    def compare_traces(
        cls,
        control: Union[LabeledTrace, TraceDir],
        test: Union[LabeledTrace, TraceDir],
        control_rank: Optional[Union[int, list[int]]] = None,
        test_rank: Optional[Union[int, list[int]]] = None,
        control_iteration: Optional[Union[int, list[int]]] = None,
        test_iteration: Optional[Union[int, list[int]]] = None,
        device_type: DeviceType = DeviceType.ALL,
        use_short_name: bool = False,
        *,
        hta_compat: bool = False,
    ) -> pd.DataFrame:
        """Per name (or short name): ``<control>_counts, <control>_total_duration, <test>_counts,
        <test>_total_duration, diff_counts, diff_duration`` (µs) and ``counts_change_categories`` (+, -, =).

        Rows: the control side's keys sorted, then the keys only the test side has, sorted.
        """
        c, t = _adapt(control, "Control"), _adapt(test, "Test")
        c_label, t_label = c.label, t.label
        if c_label == t_label:
            t_label = f"{t_label}_control_test" if hta_compat else f"{t_label}_test"
            log.warning("the two traces have the same label; the test side is labelled %s", t_label)
        a = c._summary(control_rank, control_iteration, device_type, use_short_name)
        b = t._summary(test_rank, test_iteration, device_type, use_short_name)
        only_b = b.index[~b.index.isin(a.index)]
        keys = a.index.append(only_b)
        a, b = a.reindex(keys, fill_value=0), b.reindex(keys, fill_value=0)
        out = pd.DataFrame(
            {
                f"{c_label}_counts": a["counts"].to_numpy(np.int64),
                f"{c_label}_total_duration": a["total_duration"].to_numpy(),
                f"{t_label}_counts": b["counts"].to_numpy(np.int64),
                f"{t_label}_total_duration": b["total_duration"].to_numpy(),
            },
            index=pd.Index(keys, name="short_name" if use_short_name else "name", dtype=object),
        )
        out["diff_counts"] = out[f"{t_label}_counts"] - out[f"{c_label}_counts"]
        out["diff_duration"] = out[f"{t_label}_total_duration"] - out[f"{c_label}_total_duration"]
        d = out["diff_counts"].to_numpy()
        out["counts_change_categories"] = pd.Series(
            np.where(d > 0, "+", np.where(d < 0, "-", "=")), index=out.index, dtype=object
        )
        if hta_compat and len(only_b) + int((b["counts"] == 0).sum()) > 0:
            out = out.astype({col: np.float64 for col in out.columns[:6]})  # HTA's float columns after a fill
        return out

    @classmethod
    def ops_diff(
        cls,
        control: Union[LabeledTrace, TraceDir],
        test: Union[LabeledTrace, TraceDir],
        control_rank: Optional[Union[int, list[int]]] = None,
        test_rank: Optional[Union[int, list[int]]] = None,
        control_iteration: Optional[Union[int, list[int]]] = None,
        test_iteration: Optional[Union[int, list[int]]] = None,
        device_type: DeviceType = DeviceType.ALL,
    ) -> dict[str, list[str]]:
        """Names ``added``, ``deleted``, ``increased``, ``decreased`` and ``unchanged`` (each name in one list)."""
        df = cls.compare_traces(control, test, control_rank, test_rank, control_iteration, test_iteration, device_type)
        cc, tc = df.iloc[:, 0].to_numpy(), df.iloc[:, 2].to_numpy()
        d = df["diff_counts"].to_numpy()
        names = df.index.to_numpy()
        pick = {
            "added": (cc == 0) & (tc > 0),
            "deleted": (cc > 0) & (tc == 0),
            "increased": (cc > 0) & (d > 0),
            "decreased": (tc > 0) & (d < 0),
            "unchanged": (tc > 0) & (d == 0),
        }
        return {k: names[m].tolist() for k, m in pick.items()}

    @classmethod
    def visualize_counts_diff(
        cls, df: pd.DataFrame, show_image: bool = True, export_image_path: Optional[str] = None
    ) -> None:
        """Grouped bars of both sides' counts and their difference per row of a ``compare_traces`` result."""
        cls._bars(df, "counts", "diff_counts", "Ops Count Comparison", "Counts", show_image, export_image_path)

    @classmethod
    def visualize_duration_diff(
        cls, df: pd.DataFrame, show_image: bool = True, export_image_path: Optional[str] = None
    ) -> None:
        """Grouped bars of both sides' total durations and their difference."""
        cls._bars(
            df,
            "total_duration",
            "diff_duration",
            "Ops Duration Comparison",
            "Total Duration (us)",
            show_image,
            export_image_path,
        )

    @staticmethod
    def _bars(df, suffix, diff, title, y_title, show_image, export_image_path) -> None:
        from holotrace.compat.facade_base import _plots
        from holotrace.render import plotly_figures

        labels = [c[: -len("_total_duration")] for c in df.columns if c.endswith("_total_duration")]
        assert len(labels) >= 2, "a compare_traces result needs two <label>_total_duration columns"
        chart = _plots().trace_diff_bars(
            df,
            [f"{labels[0]}_{suffix}", f"{labels[1]}_{suffix}", diff],
            [labels[0], labels[1], "Difference"],
            title,
            y_title,
        )
        fig = plotly_figures.figure(chart)
        if show_image:
            plotly_figures.show([fig])
        if export_image_path:
            fig.write_image(export_image_path)
