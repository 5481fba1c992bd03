"""The self-contained HTML report of one job: findings first, then where the GPU time went, steps and the
slowest rank, kernels, launches and counters, the critical path, and a zoomable GPU timeline of one step.

:func:`render_report` turns the analyses' frames (computed by the caller, under holotrace's rules) into one
HTML document with its style sheet and script inlined: it opens with no network. Charts are inline SVG
(:mod:`holotrace.render.report_svg`), the timeline a canvas drawn by the inlined script from JSON. Every
number shown comes from a frame; tables carry ``data-table`` names so the shown values can be checked.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis.annotations import shorten_names
from holotrace.render import report_svg as svg
from holotrace.render.report_assets import SCRIPT, STYLE

__all__ = ["render_report", "page", "table", "SECTIONS", "gpu_time_split", "timeline_data"]

#: section ids in the order the report shows them
SECTIONS = ("job", "gpu-time", "steps", "kernels", "launches", "critical-path", "timeline")
_TITLES = {"job": "The job", "gpu-time": "Where the GPU time went", "steps": "Steps and the slowest rank",
           "kernels": "Kernels", "launches": "Launches, queues and memory bandwidth",
           "critical-path": "Critical path and what to fix first", "timeline": "GPU timeline of one step"}
_TYPES = ("COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER")
_TYPE_COLOURS = ("#e08a1e", "#6aa84f", "#1f5fa8", "#8c8c8c")
_TYPE_LETTERS = ("N", "M", "C", "O")
#: at most this many GPU operations on the timeline (about 20 bytes each in the file)
MAX_TIMELINE_OPS = 150_000


def page(title: str, sections: Sequence[tuple[str, str, str]], *, subtitle: str = "") -> str:
    """One HTML document: ``sections`` is ``(id, title, inner html)`` in order, with a contents line."""
    nav = "".join(f'<a href="#{sid}">{escape(t)}</a>' for sid, t, _ in sections)
    body = "".join(f'<section id="{sid}" data-section="{sid}"><h2>{escape(t)}</h2>{html}</section>'
                   for sid, t, html in sections)
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{escape(title)}</h1><p class=\"note\">{escape(subtitle)}</p><nav>{nav}</nav>{body}"
            f"<script>{SCRIPT}</script></body></html>")


def table(name: str, df: pd.DataFrame, cols: Sequence[tuple[str, str, Optional[int]]], *, max_rows: int = 40) -> str:
    """An HTML table of ``df``: ``cols`` is ``(header, column, decimals)``, decimals None for text."""
    head = "".join(f'<th class="{"t" if d is None else "n"}">{escape(h)}</th>' for h, _, d in cols)
    rows = []
    for rec in df.head(max_rows).itertuples(index=False):
        r = rec._asdict()
        cells = []
        for _, c, d in cols:
            v = r[c]
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


# ---------------------------------------------------------------------------------------------- job


def _job_section(d: Mapping[str, Any]) -> str:
    m = d["meta"]
    facts = [("path", m["path"]), ("ranks", m["ranks_text"]), ("devices", m["devices"]), ("steps", m["steps_text"]),
             ("time span", f"{svg.fmt(m['span_ms'], 2)} ms (first to last event, common clock)")]
    if m.get("warning"):
        facts.append(("warning", m["warning"]))
    html = '<table class="facts" data-table="facts">' + "".join(
        f'<tr><td>{escape(k)}</td><td class="t">{escape(str(v))}</td></tr>' for k, v in facts) + "</table>"
    f = d["findings"]
    html += f"<h3>Findings that affect the numbers ({len(f)})</h3>"
    if not len(f):
        return html + '<p class="finding" data-findings="0">none</p>'
    items = []
    for sev, rank, code, msg in zip(f["severity"], f["rank"], f["code"], f["message"]):
        where = "" if rank is None or (isinstance(rank, float) and np.isnan(rank)) else f"rank {int(rank)}: "
        items.append(f'<li class="finding sev-{escape(str(sev))}"><b>{escape(str(sev).upper())}</b> '
                     f'<code>{escape(str(code))}</code> {escape(where + str(msg))}</li>')
    return html + f'<ul data-findings="{len(f)}">' + "".join(items) + "</ul>"


# ---------------------------------------------------------------------------------------------- GPU time


def gpu_time_split(tb: pd.DataFrame, types_by_rank: pd.DataFrame) -> pd.DataFrame:
    """Per rank: ``compute_ms, communication_ms, memory_ms, other_ms, idle_ms`` over the GPU span, from the
    temporal breakdown and the exclusive kernel-type times (an overlap counts for its first type: computation
    wins over communication, which wins over memory), so the four parts and idle add up to the span."""
    t = types_by_rank.copy()
    lab = t["kernel_type"].astype(str)
    part = np.select([lab.str.startswith("COMPUTATION"), lab.str.startswith("COMMUNICATION"),
                      lab.str.startswith("MEMORY")], ["compute", "communication", "memory"], "other")
    t["part"] = part
    piv = t.pivot_table(index="rank", columns="part", values="time_us", aggfunc="sum", fill_value=0.0)
    out = pd.DataFrame({"rank": tb["rank"].to_numpy()})
    for p in ("compute", "communication", "memory", "other"):
        out[f"{p}_ms"] = out["rank"].map(piv[p] if p in piv else pd.Series(dtype=float)).fillna(0.0).to_numpy() / 1e3
    out["idle_ms"] = tb["idle_us"].to_numpy() / 1e3
    out["span_ms"] = tb["span_us"].to_numpy() / 1e3
    return out


def _gpu_section(d: Mapping[str, Any]) -> str:
    split = d["gpu_split"]
    labels = [f"rank {r}" for r in split["rank"]]
    series = [("compute", split["compute_ms"]), ("communication", split["communication_ms"]),
              ("memory", split["memory_ms"]), ("idle", split["idle_ms"])]
    if split["other_ms"].sum() > 0:
        series.insert(3, ("other", split["other_ms"]))
    html = "<h3>GPU time per rank</h3>" + svg.stacked_bars("gpu-time", labels, series, unit="ms", digits=2)
    html += table("gpu_time", split, [("rank", "rank", 0), ("compute ms", "compute_ms", 2),
                                      ("communication ms", "communication_ms", 2), ("memory ms", "memory_ms", 2),
                                      ("idle ms", "idle_ms", 2), ("span ms", "span_ms", 2)])
    html += _note("span = first to last GPU operation of the rank; where kinds of work overlap, computation "
                  "counts first, then communication, then memory, so the parts add up to the span.")
    idle = d["idle"]
    html += "<h3>Idle time by cause</h3>"
    if idle.empty:
        html += _empty_note("no GPU operations, so no idle gaps")
    else:
        piv = idle.pivot_table(index="rank", columns="idle_category", values="idle_us", aggfunc="sum", fill_value=0.0)
        cats = [c for c in ("host_wait", "kernel_wait", "other") if c in piv.columns]
        html += svg.stacked_bars("idle-causes", [f"rank {r}" for r in piv.index],
                                 [(c.replace("_", " "), piv[c].to_numpy() / 1e3) for c in cats], unit="ms", digits=2)
        shown = piv.reset_index()
        html += table("idle_causes", shown.assign(**{c: shown[c] / 1e3 for c in cats}),
                      [("rank", "rank", 0)] + [(f"{c.replace('_', ' ')} ms", c, 2) for c in cats])
        html += _note("idle gaps between GPU operations on each stream, summed over streams: host wait = the GPU "
                      "waited for the CPU to launch; kernel wait = a short gap between kernels; other = the rest.")
    ov = d["overlap"]
    html += "<h3>Communication hidden behind compute</h3>"
    comm = ov[ov["has_communication"]] if len(ov) else ov
    if comm.empty:
        html += _empty_note("no communication kernels")
    else:
        html += svg.bars("overlap", [f"rank {r}" for r in comm["rank"]], comm["overlap_pctg"], unit="% of communication time")
        html += table("overlap", comm, [("rank", "rank", 0), ("communication ms", "comm_us", 0),
                                        ("overlapped %", "overlap_pctg", 1)])
    return html


# ---------------------------------------------------------------------------------------------- steps


def _steps_section(d: Mapping[str, Any]) -> str:
    st = d["steps"]
    html = "<h3>Step time per rank</h3>"
    if st.empty:
        html += _empty_note("no ProfilerStep annotations: the trace has no steps")
    else:
        groups = [(f"rank {r}", g["dur_us"].to_numpy() / 1e3, [f"step {s}" for s in g["step"]])
                  for r, g in st.groupby("rank", sort=True)]
        html += svg.strip("step-times", groups, unit="ms", digits=2)
        per = st.groupby("rank")["dur_us"].agg(["count", "median", "max"]).reset_index()
        html += table("step_times", per.assign(median=per["median"] / 1e3, max=per["max"] / 1e3),
                      [("rank", "rank", 0), ("steps", "count", 0), ("median ms", "median", 3), ("max ms", "max", 3)])
    ss = d["straggler_summary"]
    html += "<h3>The slowest rank and its evidence</h3>"
    if ss is None or ss.empty:
        return html + _empty_note("no collectives matched across ranks (single rank or no communication)")
    slow = ss.iloc[0]
    html += (f'<p data-slowest-rank="{int(slow["rank"])}">Rank <b>{int(slow["rank"])}</b> arrived last at collectives '
             f'in {int(slow["steps_as_straggler"])} step(s); the other ranks waited {svg.fmt(slow["waited_for_us"] / 1e3, 2)}'
             " ms for it in all, while it waited the least.</p>")
    ss = ss.sort_values("rank")
    html += svg.bars("collective-waits", [f"rank {r}" for r in ss["rank"]], ss["wait_us"] / 1e3, unit="ms waited in collectives",
                     digits=2, highlight=int(np.flatnonzero(ss["rank"].to_numpy() == slow["rank"])[0]))
    html += table("stragglers", ss.assign(wait_ms=ss["wait_us"] / 1e3, waited_for_ms=ss["waited_for_us"] / 1e3),
                  [("rank", "rank", 0), ("steps as straggler", "steps_as_straggler", 0),
                   ("waited in collectives ms", "wait_ms", 2), ("others waited for it ms", "waited_for_ms", 2)])
    return html + _note("wait = time a rank's collective ran before the last rank arrived at it (matched by step, "
                        "collective and occurrence); the rank the others wait for is the straggler.")


# ---------------------------------------------------------------------------------------------- kernels


def _kernels_section(d: Mapping[str, Any]) -> str:
    top, dist = d["top_kernels"], d["rank_distribution"]
    html = "<h3>Top kernels by total time</h3>"
    if top.empty:
        return html + _empty_note("no GPU kernels")
    short = shorten_names(top["name"].astype(str).to_numpy())
    html += svg.bars("top-kernels", [str(s) for s in short], top["sum_us"] / 1e3, unit="ms (all ranks)", digits=2)
    html += table("top_kernels", top.assign(short=short, sum_ms=top["sum_us"] / 1e3),
                  [("kernel", "short", None), ("type", "kernel_type", None), ("count", "count", 0),
                   ("total ms", "sum_ms", 2), ("mean us", "mean_us", 1)])
    if len(dist) and dist["rank"].nunique() > 1:
        html += "<h3>Per-rank time of each top kernel</h3>"
        groups = []
        for name in top["name"]:
            g = dist[dist["name"] == name]
            groups.append((str(shorten_names([str(name)])[0]), g["sum_us"].to_numpy() / 1e3, [f"rank {r}" for r in g["rank"]]))
        html += svg.strip("kernel-ranks", groups, unit="ms per rank", digits=2)
        html += _note("one dot per rank; the rank with the most time is named: a straggler or an imbalance stands out.")
    types = d["types"]
    html += "<h3>GPU time by kernel type</h3>"
    html += svg.bars("kernel-types", list(types["kernel_type"].astype(str)), types["time_us"] / 1e3, unit="ms (all ranks)", digits=2)
    html += table("kernel_types", types.assign(time_ms=types["time_us"] / 1e3),
                  [("type", "kernel_type", None), ("time ms", "time_ms", 2), ("%", "pctg", 1)])
    return html


# ---------------------------------------------------------------------------------------------- launches


def _launches_section(d: Mapping[str, Any]) -> str:
    la, summ = d["launches"], d["launch_summary"]
    html = "<h3>Launch delay</h3>"
    if la is None or la.empty:
        html += _empty_note("no launch call paired with GPU work")
    else:
        cutoff = d.get("launch_delay_cutoff", 100.0)
        html += svg.histogram("launch-delay", la["launch_delay"].to_numpy(), unit="us from the end of the launch call "
                              "to the GPU start", cutoff=cutoff)
        html += table("launch_summary", summ, [("rank", "rank", 0), ("launches", "launches", 0),
                                               ("delay median us", "delay_median_us", 1), ("delay p95 us", "delay_p95_us", 1),
                                               ("delay max us", "delay_max_us", 1), (f"over {cutoff:g} us", "launch_delay_outliers", 0)])
        worst = la.nlargest(10, "launch_delay")
        html += "<h3>Worst launch delays</h3>" + table(
            "worst_launch_delays", worst.assign(kernel_s=shorten_names(worst["kernel"].astype(str).to_numpy())),
            [("rank", "rank", 0), ("step", "iteration", 0), ("kernel", "kernel_s", None), ("delay us", "launch_delay", 1)])
    for key, title, col, unit in (("queue_length", "Launch queue length over time", "queue_length", "kernels queued"),
                                  ("memory_bandwidth", "Memory bandwidth over time", "memory_bw_gbps", "GB/s")):
        series = d.get(key) or {}
        html += f"<h3>{escape(title)}</h3>"
        if not series:
            html += _empty_note("not in this trace")
            continue
        t0 = min(int(s["ts"].min()) for s in series.values() if len(s))
        lines = []
        for r, s in sorted(series.items()):
            groups = [("", s)] if key == "queue_length" else list(s.groupby("name", sort=True))
            for g, part in groups:
                lab = f"rank {r}" + (f" {g}" if g else "")
                lines.append((lab, (part["ts"].to_numpy() - t0) / 1e6, part[col].to_numpy()))
        html += svg.lines(key.replace("_", "-"), lines, xunit="ms from the first sample", yunit=unit)
    return html


# ---------------------------------------------------------------------------------------------- critical path


def _critical_section(d: Mapping[str, Any]) -> str:
    cp, wi = d.get("critical_path"), d.get("what_if")
    if cp is None:
        return _empty_note(d.get("critical_path_note") or "not computed")
    rank, step = d["critical_path_rank"], d["critical_path_step"]
    html = f"<h3>Critical path of step {step} on rank {rank}</h3>"
    if cp.empty:
        html += _empty_note("no critical path could be built for this step")
    else:
        agg = cp.groupby("bound_by", sort=False)["duration"].sum()
        agg = agg[agg.index.astype(str) != ""].sort_values(ascending=False)
        frame = pd.DataFrame({"bound_by": agg.index.astype(str), "ms": agg.to_numpy() / 1e6,
                              "pct": 100 * agg.to_numpy() / agg.sum() if agg.sum() else 0.0})
        html += svg.bars("critical-path", list(frame["bound_by"]), frame["ms"], unit="ms on the critical path", digits=2)
        html += table("critical_path", frame, [("bound by", "bound_by", None), ("ms", "ms", 2), ("%", "pct", 1)])
    html += "<h3>What to fix first</h3>"
    if wi is None or wi.empty:
        return html + _empty_note("no counterfactual saves time on this step")
    html += svg.bars("what-if", list(wi["fix"].astype(str)), wi["saving"] / 1e3, unit="ms saved on the step", digits=2)
    html += table("what_if", wi.assign(saving_ms=wi["saving"] / 1e3),
                  [("fix", "fix", None), ("saves ms", "saving_ms", 2), ("% of step", "pct", 1), ("evidence", "evidence", None)])
    return html


# ---------------------------------------------------------------------------------------------- timeline


def timeline_data(tl: pd.DataFrame, step) -> dict:
    """The timeline's JSON: lanes (rank, stream), type colours and letters, kernel names, and per operation its
    lane, start (ns, delta-encoded in lane order), duration (ns), type and name (ids)."""
    if tl.empty:
        return {"step": step, "span": 0, "lanes": [], "lane": [], "s": [], "d": [], "k": [], "n": [], "names": [],
                "types": list(_TYPES), "colours": list(_TYPE_COLOURS), "letters": list(_TYPE_LETTERS)}
    pairs, lane = np.unique(tl[["rank", "stream"]].to_numpy(), axis=0, return_inverse=True)
    lane = lane.reshape(-1)
    start = tl["start"].to_numpy(np.int64)
    t0 = int(start.min())
    end = tl["end"].to_numpy(np.int64)
    order = np.lexsort((start, lane))
    s = start[order] - t0
    ds = np.diff(s, prepend=0)
    codes, uniq = pd.factorize(tl["name"].astype(str).to_numpy()[order])
    kt = pd.Categorical(tl["kernel_type"].astype(str).to_numpy()[order], categories=list(_TYPES)).codes
    return {"step": step, "span": int(end.max() - t0), "t0_ns": t0,
            "lanes": [f"rank {a} stream {b}" for a, b in pairs.tolist()],
            "lane": lane[order].tolist(), "s": ds.tolist(), "d": (end - start)[order].tolist(),
            "k": np.where(kt >= 0, kt, 3).tolist(), "n": codes.tolist(),
            "names": [str(x) for x in shorten_names(uniq)], "types": list(_TYPES), "colours": list(_TYPE_COLOURS),
            "letters": list(_TYPE_LETTERS)}


def _timeline_section(d: Mapping[str, Any]) -> str:
    tl, step = d["timeline"], d["timeline_step"]
    if tl is None or tl.empty:
        return _empty_note("no GPU operations to show")
    total, note = len(tl), ""
    if total > MAX_TIMELINE_OPS:  # keep the file attachable: the first operations of the step, all ranks
        cut = np.partition(tl["start"].to_numpy(), MAX_TIMELINE_OPS)[MAX_TIMELINE_OPS]
        tl = tl[tl["start"].to_numpy() < cut]
        note = (f" Only the first {len(tl):,} of {total:,} operations are drawn (the step's first "
                f"{(cut - tl['start'].min()) / 1e6:,.2f} ms); choose a shorter step with --timeline-step.")
    data = timeline_data(tl, step)
    key = "".join(f'<span><i style="background:{c}"></i>{l} = {t.lower()}</span>'
                  for t, c, l in zip(_TYPES, _TYPE_COLOURS, _TYPE_LETTERS))
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    what = f"step {step}" if step is not None else "the whole trace"
    return (f"<p>GPU operations of {escape(what)} on every rank, one lane per stream, on the job's common clock "
            f"({len(tl):,} operations). Wheel or buttons zoom, drag pans, hover names an operation.{escape(note)}</p>"
            f'<div class="key">{key}</div>'
            '<div class="tl-bar"><button id="tl-in" type="button">+ zoom in</button><button id="tl-out" type="button">'
            '− zoom out</button><button id="tl-reset" type="button">whole step</button> <span id="tl-window"></span></div>'
            f'<div id="tl-wrap"><canvas id="tl-canvas" class="plot" data-plot="timeline" data-events="{len(tl)}"></canvas>'
            f'<div id="tl-tip"></div></div><script type="application/json" id="tl-data">{payload}</script>')


_BUILDERS = {"job": _job_section, "gpu-time": _gpu_section, "steps": _steps_section, "kernels": _kernels_section,
             "launches": _launches_section, "critical-path": _critical_section, "timeline": _timeline_section}


def render_report(d: Mapping[str, Any]) -> str:
    """The report's HTML from the frames in ``d`` (see :mod:`holotrace.commands.report` for the keys)."""
    sections = [(sid, _TITLES[sid], _BUILDERS[sid](d)) for sid in SECTIONS]
    return page(f"holotrace report: {d['meta']['name']}", sections, subtitle=d["meta"].get("subtitle", ""))
