"""The self-contained HTML report of a comparison (``holotrace diff BASE NEW --report diff.html``).

Same format as the job report (:mod:`holotrace.render.report`): the verdict and the tripped gate rules first,
then the biggest contributors to the change of a step's time, the per-step figures side by side, the kernels,
operators and annotations that changed most, and the names that appeared or disappeared. Fed with a
:class:`holotrace.analysis.diff.JobDiff` only; times are µs as in its frames. The plots come from
:mod:`holotrace.render.plots`, drawn by :mod:`holotrace.render.report_svg`.
"""

from __future__ import annotations

from collections.abc import Sequence

from holotrace.render import diff_plots
from holotrace.render import report_svg as svg
from holotrace.render.report import page, table
from holotrace.text import html_escape as escape

__all__ = ["render_diff_report", "DIFF_SECTIONS"]

DIFF_SECTIONS = ("verdict", "contributors", "metrics", "changed", "appeared")


def _verdict(d, trips: Sequence, base: str, new: str) -> str:
    m = d.metrics.set_index("metric")
    html = (
        '<table class="facts" data-table="sides"><tr><td>base</td><td class="t">'
        + escape(base)
        + f' (steps {escape(", ".join(map(str, d.base_steps)) or "none")})</td></tr><tr><td>new</td><td class="t">'
        + escape(new)
        + f" (steps {escape(', '.join(map(str, d.new_steps)) or 'none')})</td></tr></table>"
    )
    if "step_time" in m.index:
        st = m.loc["step_time"]
        word = "slower" if st["delta"] > 0 else "faster"
        html += (
            f'<p data-step-delta="{st["delta"]:.3f}">Step time {svg.fmt(st["base"] / 1e3, 3)} ms → '
            f"{svg.fmt(st['new'] / 1e3, 3)} ms: <b>{svg.fmt(abs(st['delta']) / 1e3, 3)} ms {word}</b> "
            f"({st['delta_pct']:+.1f}%), base step-to-step σ {svg.fmt(st['base_sigma'] / 1e3, 3)} ms.</p>"
        )
    html += f"<h3>Gate rules that tripped ({len(trips)})</h3>"
    html += (
        "<ul>" + "".join(f'<li class="finding sev-error">{escape(t.message())}</li>' for t in trips) + "</ul>"
        if trips
        else '<p class="finding">none</p>'
    )
    for n in d.notes:
        html += f'<p class="note">{escape(str(n))}</p>'
    return html


def _contributors(d, top: int) -> str:
    c = d.contributors.head(top)
    if c.empty:
        return '<p class="note">nothing changed the step time</p>'
    return (
        svg.render(diff_plots.diff_contributors(c))
        + table(
            "contributors",
            c.assign(base_ms=c["base_us"] / 1e3, new_ms=c["new_us"] / 1e3, delta_ms=c["delta_us"] / 1e3),
            [("item", "item", None), ("base ms", "base_ms", 3), ("new ms", "new_ms", 3), ("change ms", "delta_ms", 3)],
        )
        + '<p class="note">per step and rank, the biggest change first: kernels by their time, idle gaps by cause.</p>'
    )


def _metrics(d) -> str:
    m = d.metrics
    if m.empty:
        return '<p class="note">no steps to compare</p>'
    return svg.render(diff_plots.diff_metrics(m)) + table(
        "metrics",
        m,
        [
            ("metric", "metric", None),
            ("unit", "unit", None),
            ("base", "base", 2),
            ("new", "new", 2),
            ("change", "delta", 2),
            ("change %", "delta_pct", 1),
            ("base σ", "base_sigma", 2),
        ],
    )


def _changed(d, top: int) -> str:
    ops = d.ops[(d.ops["rank"] == -1) & (d.ops["status"] == "both")]
    html = ""
    for fam, title in (("kernel", "Kernels"), ("op", "Operators"), ("annotation", "Annotations")):
        f = ops[ops["family"] == fam]
        f = f.reindex(f["delta_per_step_us"].abs().sort_values(ascending=False, kind="stable").index).head(top)
        html += f"<h3>{title} that changed most (time per step)</h3>"
        if f.empty:
            html += '<p class="note">none in both runs</p>'
            continue
        chart = diff_plots.diff_changed(f, fam, f"{title} that changed most")
        html += svg.render(chart)
        html += table(
            f"changed_{fam}",
            f.assign(short=list(chart.labels), b=f["per_step_us_base"] / 1e3, n=f["per_step_us_new"] / 1e3),
            [
                ("name", "short", None),
                ("count base", "count_base", 0),
                ("count new", "count_new", 0),
                ("base ms/step", "b", 3),
                ("new ms/step", "n", 3),
                ("change %", "delta_pct", 1),
            ],
        )
    return html


def _appeared(d, top: int) -> str:
    ops = d.ops[(d.ops["rank"] == -1) & (d.ops["status"] != "both")]
    if ops.empty:
        return '<p class="note">the same names ran in both</p>'
    per = ops["per_step_us_new"].fillna(0.0) - ops["per_step_us_base"].fillna(0.0)
    ops = ops.assign(delta_ms=per / 1e3, short=[str(k)[:70] for k in ops["key"]])
    ops = ops.reindex(ops["delta_ms"].abs().sort_values(ascending=False, kind="stable").index).head(top)
    return svg.render(diff_plots.diff_appeared(ops)) + table(
        "appeared",
        ops,
        [
            ("name", "short", None),
            ("family", "family", None),
            ("status", "status", None),
            ("change ms/step", "delta_ms", 3),
        ],
    )


def render_diff_report(d, trips: Sequence, base: str, new: str, *, top: int = 10) -> str:
    """HTML of the comparison ``d`` (a ``JobDiff``) with the tripped rules ``trips``."""
    sections = [
        ("verdict", "What changed", _verdict(d, trips, base, new)),
        ("contributors", "Biggest contributors to the change of a step", _contributors(d, top)),
        ("metrics", "Per-step figures, base and new", _metrics(d)),
        ("changed", "What got slower or faster", _changed(d, top)),
        ("appeared", "Names that appeared or disappeared", _appeared(d, top)),
    ]
    return page("holotrace diff report", sections, subtitle=f"{base} → {new}; numbers under holotrace's rules")
