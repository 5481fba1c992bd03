"""The self-contained HTML report of one job: findings first, then where the GPU time went, steps and the
slowest rank, kernels, launches and counters, the critical path, and a zoomable GPU timeline of one step.

:func:`render_report` turns the analyses' frames (computed by the caller, under holotrace's rules) into one
HTML document with its style sheet and script inlined: it opens with no network. Every plot is built by
:mod:`holotrace.render.plots` (the same builders the facade's figures come from) and drawn by
:mod:`holotrace.render.report_svg`: inline SVG, and the timeline a canvas drawn by the inlined script from JSON.
Every number shown comes from a table (a :class:`holotrace.table.Table`, or a pandas frame read as one: no pandas is
imported here); tables carry ``data-table`` names so the shown values can be checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from holotrace.analysis import grouped
from holotrace.order_stats import distinct
from holotrace.render import plots
from holotrace.render import report_svg as svg
from holotrace.render.groups import pivot_sum, texts
from holotrace.render.report_assets import SCRIPT, STYLE
from holotrace.table import Table
from holotrace.text import fit_names
from holotrace.text import html_escape as escape

__all__ = ["render_report", "page", "table", "SECTIONS", "gpu_time_split", "timeline_data"]

#: section ids in the order the report shows them
SECTIONS = ("job", "gpu-time", "steps", "kernels", "launches", "critical-path", "timeline")
_TITLES = {
    "job": "The job",
    "gpu-time": "Where the GPU time went",
    "steps": "Steps and the slowest rank",
    "kernels": "Kernels",
    "launches": "Launches, queues and memory bandwidth",
    "critical-path": "Critical path and what to fix first",
    "timeline": "GPU timeline of one step",
}
#: at most this many GPU operations on the timeline (about 20 bytes each in the file)
MAX_TIMELINE_OPS = 150_000


def page(title: str, sections: Sequence[tuple[str, str, str]], *, subtitle: str = "") -> str:
    """One HTML document: ``sections`` is ``(id, title, inner html)`` in order, with a contents line."""
    nav = "".join(f'<a href="#{sid}">{escape(t)}</a>' for sid, t, _ in sections)
    body = "".join(
        f'<section id="{sid}" data-section="{sid}"><h2>{escape(t)}</h2>{html}</section>' for sid, t, html in sections
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<h1>{escape(title)}</h1><p class="note">{escape(subtitle)}</p><nav>{nav}</nav>{body}'
        f"<script>{SCRIPT}</script></body></html>"
    )


def table(name: str, df, cols: Sequence[tuple[str, str, Optional[int]]], *, max_rows: int = 40) -> str:
    """An HTML table of ``df`` (a table or a frame): ``cols`` is ``(header, column, decimals)``, decimals None for
    text."""
    df = Table.of(df)
    head = "".join(f'<th class="{"t" if d is None else "n"}">{escape(h)}</th>' for h, _, d in cols)
    values = {c: df[c][:max_rows].tolist() for _, c, _ in cols}
    rows = []
    for i in range(min(len(df), max_rows)):
        cells = []
        for _, c, d in cols:
            v = values[c][i]
            if d is None:
                cells.append(f'<td class="t">{escape(str(v))}</td>')
            elif v is None or (isinstance(v, float) and not np.isfinite(v)):
                cells.append("<td>–</td>")
            else:
                cells.append(f"<td>{svg.fmt(float(v), d)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = f'<p class="note">{len(df) - max_rows} more rows not shown</p>' if len(df) > max_rows else ""
    return f'<table data-table="{escape(name)}"><tr>{head}</tr>{"".join(rows)}</table>{more}'


def _note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def _empty_note(text: str) -> str:
    return f'<p class="note empty">{escape(text)}</p>'


def _with(t: Table, **cols) -> Table:
    """``t`` with more columns (as a frame's ``assign``)."""
    return Table({**dict(t.items()), **cols}, n=len(t))


# ---------------------------------------------------------------------------------------------- job


def _job_section(d: Mapping[str, Any]) -> str:
    m = d["meta"]
    facts = [
        ("path", m["path"]),
        ("ranks", m["ranks_text"]),
        ("devices", m["devices"]),
        ("steps", m["steps_text"]),
        ("time span", f"{svg.fmt(m['span_ms'], 2)} ms (first to last event, common clock)"),
    ]
    if m.get("warning"):
        facts.append(("warning", m["warning"]))
    if m.get("costliest_rank"):
        facts.append(("costliest rank", m["costliest_rank"]["why"]))
    html = (
        '<table class="facts" data-table="facts">'
        + "".join(f'<tr><td>{escape(k)}</td><td class="t">{escape(str(v))}</td></tr>' for k, v in facts)
        + "</table>"
    )
    f = Table.of(d["findings"])
    html += f"<h3>Findings that affect the numbers ({len(f)})</h3>"
    if not len(f):
        return html + '<p class="finding" data-findings="0">none</p>'
    items = []
    for sev, rank, code, msg in zip(f["severity"], f["rank"], f["code"], f["message"]):
        where = "" if rank is None or (isinstance(rank, float) and np.isnan(rank)) else f"rank {int(rank)}: "
        items.append(
            f'<li class="finding sev-{escape(str(sev))}"><b>{escape(str(sev).upper())}</b> '
            f"<code>{escape(str(code))}</code> {escape(where + str(msg))}</li>"
        )
    return html + f'<ul data-findings="{len(f)}">' + "".join(items) + "</ul>"


# ---------------------------------------------------------------------------------------------- GPU time


def gpu_time_split(tb, types_by_rank) -> Table:
    """Per rank: ``compute_ms, communication_ms, memory_ms, other_ms, idle_ms`` over the GPU span, from the
    temporal breakdown and the exclusive kernel-type times (an overlap counts for its first type: computation
    wins over communication, which wins over memory), so the four parts and idle add up to the span. Tables or
    frames in, a table out."""
    tb, t = Table.of(tb), Table.of(types_by_rank)
    prefix = {"COMPUTATION": "compute", "COMMUNICATION": "communication", "MEMORY": "memory"}
    part = [next((p for k, p in prefix.items() if x.startswith(k)), "other") for x in texts(t["kernel_type"])]
    ranks, parts, sums = pivot_sum(t["rank"], np.array(part, dtype=object), t["time_us"])
    rank = tb["rank"]
    pos = np.clip(np.searchsorted(ranks, rank), 0, max(len(ranks) - 1, 0))
    found = ranks[pos] == rank if len(ranks) else np.zeros(len(rank), dtype=bool)
    have = texts(parts)
    cols = {"rank": rank}
    for p in ("compute", "communication", "memory", "other"):
        got = sums[pos, have.index(p)] if p in have else np.zeros(len(rank))
        cols[f"{p}_ms"] = np.where(found, got, 0.0) / 1e3
    cols["idle_ms"] = np.asarray(tb["idle_us"]) / 1e3
    cols["span_ms"] = np.asarray(tb["span_us"]) / 1e3
    return Table(cols)


def _gpu_section(d: Mapping[str, Any]) -> str:
    split = d["gpu_split"]
    html = "<h3>GPU time per rank</h3>" + svg.render(plots.gpu_time(split))
    html += table(
        "gpu_time",
        split,
        [
            ("rank", "rank", 0),
            ("compute ms", "compute_ms", 2),
            ("communication ms", "communication_ms", 2),
            ("memory ms", "memory_ms", 2),
            ("idle ms", "idle_ms", 2),
            ("span ms", "span_ms", 2),
        ],
    )
    html += _note(
        "span = first to last GPU operation of the rank; where kinds of work overlap, computation "
        "counts first, then communication, then memory, so the parts add up to the span."
    )
    idle = Table.of(d["idle"])
    html += "<h3>Idle time by cause</h3>"
    if idle.empty:
        html += _empty_note("no GPU operations, so no idle gaps")
    else:
        chart, shown = plots.idle_causes(idle)
        html += svg.render(chart)
        html += table(
            "idle_causes",
            shown,
            [("rank", "rank", 0)] + [(f"{c.replace('_', ' ')} ms", c, 2) for c in shown.columns[1:]],
        )
        html += _note(
            "idle gaps between GPU operations on each stream, summed over streams: host wait = the GPU "
            "waited for the CPU to launch; kernel wait = a short gap between kernels; other = the rest."
        )
    ov = Table.of(d["overlap"])
    html += "<h3>Communication hidden behind compute</h3>"
    comm = ov.take(np.asarray(ov["has_communication"], dtype=bool)) if len(ov) else ov
    if comm.empty:
        html += _empty_note("no communication kernels")
    else:
        html += svg.render(plots.comm_overlap(comm["rank"], comm["overlap_pctg"]))
        html += table(
            "overlap",
            comm,
            [("rank", "rank", 0), ("communication ms", "comm_us", 0), ("overlapped %", "overlap_pctg", 1)],
        )
    return html


# ---------------------------------------------------------------------------------------------- steps


def _steps_section(d: Mapping[str, Any]) -> str:
    st = Table.of(d["steps"])
    html = "<h3>Step time per rank</h3>"
    if st.empty:
        html += _empty_note("no ProfilerStep annotations: the trace has no steps")
    else:
        html += svg.render(plots.step_times(st))
        ranks, code = np.unique(st["rank"], return_inverse=True)  # per rank: count, median, max (as pandas' agg)
        code, dur, k = code.reshape(-1), np.asarray(st["dur_us"], dtype=np.float64), len(ranks)
        per = Table(
            {
                "rank": ranks,
                "count": grouped.group_count(code, k, dur),
                "median": grouped.group_median(code, dur, k) / 1e3,
                "max": grouped.group_max(code, dur, k) / 1e3,
            }
        )
        html += table(
            "step_times",
            per,
            [("rank", "rank", 0), ("steps", "count", 0), ("median ms", "median", 3), ("max ms", "max", 3)],
        )
    ss = d["straggler_summary"]
    html += "<h3>The slowest rank and its evidence</h3>"
    if ss is None or not len(ss):
        return html + _empty_note("no collectives matched across ranks (single rank or no communication)")
    ss = Table.of(ss)
    slow_rank = int(ss["rank"][0])
    html += (
        f'<p data-slowest-rank="{slow_rank}">Rank <b>{slow_rank}</b> arrived last at collectives '
        f"in {int(ss['steps_as_straggler'][0])} step(s); the other ranks waited "
        f"{svg.fmt(float(ss['waited_for_us'][0]) / 1e3, 2)} ms for it in all, while it waited the least.</p>"
    )
    html += svg.render(plots.collective_waits(ss, slow_rank))
    ss = ss.take(np.argsort(ss["rank"], kind="stable"))
    html += table(
        "stragglers",
        _with(ss, wait_ms=ss["wait_us"] / 1e3, waited_for_ms=ss["waited_for_us"] / 1e3),
        [
            ("rank", "rank", 0),
            ("steps as straggler", "steps_as_straggler", 0),
            ("waited in collectives ms", "wait_ms", 2),
            ("others waited for it ms", "waited_for_ms", 2),
        ],
    )
    return html + _note(
        "wait = time a rank's collective ran before the last rank arrived at it (matched by step, "
        "collective and occurrence); the rank the others wait for is the straggler."
    )


# ---------------------------------------------------------------------------------------------- kernels


def _kernels_section(d: Mapping[str, Any]) -> str:
    top, dist = Table.of(d["top_kernels"]), Table.of(d["rank_distribution"])
    html = "<h3>Top kernels by total time</h3>"
    if top.empty:
        return html + _empty_note("no GPU kernels")
    chart = plots.top_kernels(top)
    html += svg.render(chart)
    html += table(
        "top_kernels",
        _with(top, short=list(chart.labels), sum_ms=top["sum_us"] / 1e3),
        [
            ("kernel", "short", None),
            ("type", "kernel_type", None),
            ("count", "count", 0),
            ("total ms", "sum_ms", 2),
            ("mean us", "mean_us", 1),
        ],
    )
    if len(dist) and len(distinct(np.asarray(dist["rank"]))) > 1:
        html += "<h3>Per-rank time of each top kernel</h3>"
        html += svg.render(plots.kernel_rank_spread(top, dist))
        html += _note("one dot per rank; the rank with the most time is named: a straggler or an imbalance stands out.")
    types = Table.of(d["types"])
    html += "<h3>GPU time by kernel type</h3>"
    html += svg.render(plots.kernel_types(types))
    html += table(
        "kernel_types",
        _with(types, time_ms=types["time_us"] / 1e3),
        [("type", "kernel_type", None), ("time ms", "time_ms", 2), ("%", "pctg", 1)],
    )
    return html


# ---------------------------------------------------------------------------------------------- launches


def _largest(x: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest values of ``x`` (NaN left out), largest first, earlier first on ties (as
    ``DataFrame.nlargest``, without copying the frame's columns)."""
    ok = np.flatnonzero(~np.isnan(x))
    if len(ok) > k:
        cut = np.partition(x[ok], len(ok) - k)[len(ok) - k]
        ok = ok[x[ok] >= cut]
    return ok[np.lexsort((ok, -x[ok]))][:k]


def _launches_section(d: Mapping[str, Any]) -> str:
    la, summ = d["launches"], d["launch_summary"]
    html = "<h3>Launch delay</h3>"
    if la is None or la.empty:
        html += _empty_note("no launch call paired with GPU work")
    else:
        cutoff = d.get("launch_delay_cutoff", 100.0)
        la = Table.of(la)  # (a frame's columns read once)
        delay = np.asarray(la["launch_delay"], dtype=np.float64)
        html += svg.render(plots.launch_delay(delay, cutoff))
        html += table(
            "launch_summary",
            summ,
            [
                ("rank", "rank", 0),
                ("launches", "launches", 0),
                ("delay median us", "delay_median_us", 1),
                ("delay p95 us", "delay_p95_us", 1),
                ("delay max us", "delay_max_us", 1),
                (f"over {cutoff:g} us", "launch_delay_outliers", 0),
            ],
        )
        pick = _largest(delay, 10)
        worst = Table(
            {
                "rank": la["rank"][pick],
                "iteration": la["iteration"][pick],
                "kernel_s": fit_names([str(k) for k in la["kernel"][pick]], 60),
                "launch_delay": delay[pick],
            }
        )
        html += "<h3>Worst launch delays</h3>" + table(
            "worst_launch_delays",
            worst,
            [
                ("rank", "rank", 0),
                ("step", "iteration", 0),
                ("kernel", "kernel_s", None),
                ("delay us", "launch_delay", 1),
            ],
        )
    for key, title, col, unit in (
        ("queue_length", "Launch queue length over time", "queue_length", "kernels queued"),
        ("memory_bandwidth", "Memory bandwidth over time", "memory_bw_gbps", "GB/s"),
    ):
        series = d.get(key) or {}
        html += f"<h3>{escape(title)}</h3>"
        if not series:
            html += _empty_note("not in this trace")
            continue
        html += svg.render(
            plots.counter_lines(
                series, col, name=key.replace("_", "-"), title=title, unit=unit, by_name=key != "queue_length"
            )
        )
    return html


# ---------------------------------------------------------------------------------------------- critical path


FIXES_SHOWN = 10  # fixes on the report's chart and table


def _fix_rows(fixes, n: int = FIXES_SHOWN) -> Table:
    """The first ``n`` fixes of ``advice.job_advice`` with a label (fix, target, rank: never two alike), the rank
    as text ('job' when job-wide) and the evidence joined."""
    top = Table.of(fixes).head(n)
    rank_text = ["job" if r is None or r != r else str(int(r)) for r in top["rank"].tolist()]
    target = [t if isinstance(t, str) and t else "" for t in top["target"].tolist()]
    short = fit_names([t for t in target if t], plots.LABEL_WIDTH) if any(target) else []
    it = iter(short)
    label = [
        f"{f}" + (f" {next(it)}" if t else "") + (f" (rank {r})" if r != "job" else "")
        for f, t, r in zip(top["fix"].tolist(), target, rank_text)
    ]
    evidence = [", ".join(e) if isinstance(e, (list, tuple)) else "" for e in top["evidence"]]
    return _with(top, label=label, rank_text=rank_text, evidence_text=evidence)


def _critical_section(d: Mapping[str, Any]) -> str:
    cp, fixes = d.get("critical_path"), d.get("fixes")
    if cp is None:
        return _empty_note(d.get("critical_path_note") or "not computed")
    rank, step = d["critical_path_rank"], d["critical_path_step"]
    html = f"<h3>Critical path of step {step} on rank {rank}</h3>"
    cp = Table.of(cp)
    if cp.empty:
        html += _empty_note("no critical path could be built for this step")
    else:
        chart, frame = plots.critical_path(cp)
        html += svg.render(chart)
        html += table("critical_path", frame, [("bound by", "bound_by", None), ("ms", "ms", 2), ("%", "pct", 1)])
    html += "<h3>What to fix first (the whole job, replayed)</h3>"
    if fixes is None or Table.of(fixes).empty:
        return html + _empty_note("no fix shortens the job's replayed step")
    top = _fix_rows(fixes)
    html += svg.render(plots.what_if(top))
    html += table(
        "what_if",
        top,
        [
            ("fix", "fix", None),
            ("rank", "rank_text", None),
            ("saves ms", "saving_ms", 3),
            ("% of job step", "saving_pct", 1),
            ("predicted step ms", "predicted_step_ms", 3),
            ("evidence", "evidence_text", None),
        ],
    )
    return html


# ---------------------------------------------------------------------------------------------- timeline


def timeline_data(tl, step) -> dict:
    """The timeline's JSON (:func:`holotrace.render.report_svg.gantt_json` of :func:`plots.gpu_timeline`)."""
    return svg.gantt_json(plots.gpu_timeline(tl, step))


def _timeline_section(d: Mapping[str, Any]) -> str:
    tl, step = d["timeline"], d["timeline_step"]
    if tl is None or Table.of(tl).empty:
        return _empty_note("no GPU operations to show")
    tl = Table.of(tl)
    total, note = len(tl), ""
    if total > MAX_TIMELINE_OPS:  # keep the file attachable: the first operations of the step, all ranks
        cut = np.partition(tl["start"], MAX_TIMELINE_OPS)[MAX_TIMELINE_OPS]
        tl = tl.take(tl["start"] < cut)
        note = (
            f" Only the first {len(tl):,} of {total:,} operations are drawn (the step's first "
            f"{(cut - tl['start'].min()) / 1e6:,.2f} ms); choose a shorter step with --timeline-step."
        )
    what = f"step {step}" if step is not None else "the whole trace"
    return (
        f"<p>GPU operations of {escape(what)} on every rank, one lane per stream, on the job's common clock "
        f"({len(tl):,} operations). Wheel or buttons zoom, drag pans, hover names an operation.{escape(note)}</p>"
        + svg.render(plots.gpu_timeline(tl, step))
    )


_BUILDERS = {
    "job": _job_section,
    "gpu-time": _gpu_section,
    "steps": _steps_section,
    "kernels": _kernels_section,
    "launches": _launches_section,
    "critical-path": _critical_section,
    "timeline": _timeline_section,
}


ADVICE_FREE = ("gpu-time", "steps", "kernels", "launches", "timeline")  # sections that read neither the advice nor meta


def render_sections(d: Mapping[str, Any], ids: Sequence[str] = ADVICE_FREE) -> dict:
    """The HTML of the sections ``ids`` (by id), from the frames they read: a command renders them while other work
    runs, and :func:`render_report` takes them from ``d["rendered"]`` as they are."""
    return {sid: _BUILDERS[sid](d) for sid in ids}


def render_report(d: Mapping[str, Any]) -> str:
    """The report's HTML from the frames in ``d`` (see :mod:`holotrace.commands.report` for the keys); the sections
    in ``d["rendered"]`` (:func:`render_sections`) as they are."""
    done = d.get("rendered") or {}
    sections = [(sid, _TITLES[sid], done[sid] if sid in done else _BUILDERS[sid](d)) for sid in SECTIONS]
    return page(f"holotrace report: {d['meta']['name']}", sections, subtitle=d["meta"].get("subtitle", ""))
