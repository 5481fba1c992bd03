"""``holotrace diff BASE NEW``: what got slower or faster between two runs, and why; a CI regression gate.

One screen: the per-step figures of both runs (step time, idle / compute share, idle by cause, overlap,
launch delay) with their change, the largest contributors to the change of a step's time, the kernels
that changed most, and the names that appeared or disappeared. ``--fail-on RULE`` (repeatable) makes the
command exit 1 when a rule trips, printing which; ``--min-effect 2sigma`` (default) ignores changes within
twice the step-to-step spread of BASE, so the gate does not flap on run-to-run noise.
"""

from __future__ import annotations

import argparse
import re

import numpy as np

from holotrace.analysis.diff import NORMALISATIONS, diff_jobs
from holotrace.analysis.diff_gate import check_rules, parse_rule
from holotrace.commands._dest import writes
from holotrace.commands._load import add_rules_option
from holotrace.commands._load import load_path as load
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE
from holotrace.model.filter import parse_int_ranges

__all__ = ["COMMAND", "add_arguments", "run", "build_report", "parse_min_effect"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", help="the reference run: folder of per-rank trace files, or one trace file")
    p.add_argument(
        "new",
        help="the run compared with it (the same path with --base-steps/--new-steps compares two "
        "step ranges of one run)",
    )
    g = p.add_argument_group("comparison")
    g.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="RULE",
        help="exit 1 when the rule trips, e.g. 'step_time>+5%%', 'idle>+2pp', 'kernel:nccl*>+10%%', "
        "'overlap<-5pp', 'host_wait>+500us' (repeatable)",
    )
    g.add_argument(
        "--min-effect",
        default="2sigma",
        metavar="K",
        help="a rule trips only when the change also exceeds K times BASE's step-to-step standard "
        "deviation, e.g. 2sigma (default), 3sigma, 0 (no noise guard)",
    )
    g.add_argument("--ranks", metavar="LIST", help="compare only these ranks, e.g. 0-3 (default: all)")
    g.add_argument("--base-steps", metavar="LIST", help="steps of BASE compared, e.g. 5-9 (default: all)")
    g.add_argument("--new-steps", metavar="LIST", help="steps of NEW compared (default: all)")
    g.add_argument(
        "--normalize",
        choices=NORMALISATIONS,
        default="none",
        help="kernel-name normalisation before matching: none, short (HTA's short names), template "
        "(template arguments removed)",
    )
    g.add_argument("--top", type=int, default=10, metavar="N", help="rows per table (default 10)")
    g.add_argument(
        "--report", metavar="FILE", help="also write a self-contained HTML report of the comparison (e.g. diff.html)"
    )
    writes(p, "report", "file", "diff.html")
    ld = p.add_argument_group("loading")
    ld.add_argument("--no-cache", action="store_true", help="decode the files again; neither read nor write the cache")
    ld.add_argument(
        "--cache-dir", metavar="DIR", help="cache folder (default: $HOLOTRACE_CACHE_DIR or ~/.cache/holotrace)"
    )
    ld.add_argument("--workers", type=int, metavar="N", help="cores used to decode")
    ld.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    ld.add_argument("--debug", action="store_true", help="show tracebacks")
    add_rules_option(ld)
    add_output_options(p)


def parse_min_effect(text: str) -> float:
    """``"2sigma"`` / ``"2"`` → 2.0; bad text raises a one-line AnalysisError."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:sigma|σ)?\s*", str(text))
    if not m:
        raise AnalysisError(f"cannot read --min-effect {text!r}", fix="write a multiple of sigma, e.g. 2sigma or 0")
    return float(m.group(1))


def run(args: argparse.Namespace) -> int:
    rules = list(args.fail_on)
    for r in rules:  # bad rules fail before anything is loaded
        parse_rule(r)
    k = parse_min_effect(args.min_effect)
    opts = dict(
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        workers=args.workers,
        progress_bar=False if args.quiet else None,
        rules=args.rules,
    )
    base = load(args.base, **opts)
    new = base if args.new == args.base else load(args.new, **opts)
    steps = lambda s, what: parse_int_ranges(s, what) if s else None  # noqa: E731
    d = diff_jobs(
        base,
        new,
        rules=NATIVE,
        base_steps=steps(args.base_steps, "step"),
        new_steps=steps(args.new_steps, "step"),
        ranks=parse_int_ranges(args.ranks, "rank") if args.ranks else None,
        normalize=args.normalize,
    )
    trips = check_rules(d, rules, min_effect=k)
    emit(build_report(d, trips, args.base, args.new, rules, k, top=args.top), args)
    if getattr(args, "report", None):
        from holotrace.render.html_file import write_html
        from holotrace.render.report_diff import render_diff_report

        write_html(render_diff_report(d, trips, args.base, args.new, top=args.top), args.report)
    return 1 if trips else 0


COMMAND = Command(
    name="diff",
    help="compare two runs: what got slower or faster and why; --fail-on rules for a CI gate (exit 1)",
    description=__doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
    add_arguments=add_arguments,
    run=run,
)


def build_report(d, trips, base_path: str, new_path: str, rules, min_effect: float, *, top: int = 10) -> Report:
    """Lay out a :class:`~holotrace.analysis.diff.JobDiff` and the gate's verdict (pure)."""
    header = [
        f"base    {base_path}  (ranks {_span(d.ranks[0])}, {len(d.base_steps)} step(s))",
        f"new     {new_path}  (ranks {_span(d.ranks[1])}, {len(d.new_steps)} step(s))",
    ]
    if rules:
        if trips:
            header += [f"FAIL    {t.message()}" for t in trips]
        else:
            header.append(f"PASS    no rule tripped ({', '.join(rules)}; noise guard {min_effect:g} sigma)")
    header += [f"NOTE    {n}" for n in d.notes]
    m = d.metrics.copy()
    m["change"] = [_fmt_change(r) for r in m.itertuples()]
    metrics = m[["metric", "unit", "base", "new", "change", "base_sigma"]]
    c = d.contributors.head(top).copy()  # full names: the table shortens them (never two alike), --wide does not
    k = d.ops[(d.ops["rank"] == -1) & (d.ops["family"] == "kernel") & (d.ops["status"] == "both")].head(top)
    kern = k.assign(name=k["key"])[
        [
            "name",
            "count_base",
            "count_new",
            "mean_us_base",
            "mean_us_new",
            "p95_us_base",
            "p95_us_new",
            "delta_per_step_us",
            "delta_pct",
        ]
    ]
    moved = d.ops[(d.ops["rank"] == -1) & (d.ops["status"] != "both")][
        ["family", "key", "status", "count_base", "count_new", "delta_per_step_us"]
    ]
    sections = [
        Section(
            "metrics",
            "Per step (mean over steps; idle causes per rank, summed over streams)",
            metrics,
            digits={"base": 2, "new": 2, "base_sigma": 2},
        ),
        Section(
            "contributors",
            "Largest contributors to the change of a step's time (us per step per rank)",
            c,
            digits={"base_us": 1, "new_us": 1, "base_sigma_us": 1, "delta_us": 1},
        ),
        Section(
            "kernels",
            "Kernels that changed most (all ranks)",
            kern,
            digits={
                "mean_us_base": 1,
                "mean_us_new": 1,
                "p95_us_base": 1,
                "p95_us_new": 1,
                "delta_per_step_us": 1,
                "delta_pct": 1,
            },
        ),
        Section(
            "appeared",
            "Names that appeared or disappeared",
            moved.head(top),
            digits={"delta_per_step_us": 1},
            notes=[f"{len(moved)} in all"] if len(moved) > top else [],
        ),
    ]
    if len(d.merged_names):
        sections[-1].notes.append(f"name normalisation merged {len(d.merged_names)} raw names (see merged_names)")
    import pandas as pd

    trip_frame = pd.DataFrame(
        [t._asdict() for t in trips], columns=["rule", "item", "base", "new", "change", "unit", "sigma"]
    )
    data = {
        "trips": trip_frame,
        "metrics": d.metrics,
        "contributors": d.contributors,
        "ops": d.ops,
        "merged_names": d.merged_names,
    }
    meta = {
        "base": base_path,
        "new": new_path,
        "base_steps": d.base_steps,
        "new_steps": d.new_steps,
        "notes": d.notes,
        "rules": list(rules),
        "min_effect_sigma": min_effect,
        "failed": bool(trips),
    }
    return Report(
        title="holotrace diff: what changed between two runs", sections=sections, header=header, data=data, meta=meta
    )


def _span(ranks) -> str:
    ranks = list(ranks)
    if not ranks:
        return "none"
    return (
        f"{ranks[0]}-{ranks[-1]}"
        if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 1
        else ",".join(map(str, ranks))
    )


def _fmt_change(r) -> str:
    if not np.isfinite(r.delta):
        return "-"
    if r.unit == "%":
        return f"{r.delta:+.2f} pp"
    return f"{r.delta:+.1f} us" + (f" ({r.delta_pct:+.1f}%)" if np.isfinite(r.delta_pct) else "")
