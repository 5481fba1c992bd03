"""``holotrace info PATH``: what a job holds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from holotrace.commands._load import add_load_options, load_job
from holotrace.commands.base import Command
from holotrace.model.summary import job_facts
from holotrace.text import fmt_steps, sanitize_lines


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    facts = job_facts(job)
    if args.json:
        print(json.dumps(facts, indent=2, default=str))
        return 0
    print(sanitize_lines(render(facts)))
    return 0


COMMAND = Command(
    name="info",
    help="ranks, files, devices, events by category, steps, time span, findings",
    description="Show what a job's trace files hold: ranks, files, devices, world size, events by "
    "category, profiler steps, time span and what validation found.",
    add_arguments=add_arguments,
    run=run,
)


def render(facts: dict) -> str:
    out = []
    pr = facts["per_rank"]
    out.append(f"job      {facts['path']}")
    out.append(
        f"ranks    {facts['ranks_text']}  ({len(pr)} loaded"
        + (f", world size {facts['world_size']})" if facts["world_size"] else ")")
    )
    devs = sorted({d for r in pr for d in r["devices"]})
    types = sorted({r["device_type"] for r in pr})
    out.append(f"devices  {', '.join(devs) or '(none listed)'}  [{', '.join(types)}]")
    backends = sorted({str(r["backend"]) for r in pr if r["backend"]})
    if backends:
        out.append(f"backend  {', '.join(backends)}")
    steps = sorted({s for r in pr for s in r["steps"]})
    out.append(f"steps    {_steps_text(steps)}")
    out.append("")
    out.append(f"{'rank':>5}  {'file':<34} {'MB':>7} {'events':>9} {'kernels':>8} {'span ms':>10}")
    for r in pr:
        name = Path(r["file"]).name
        name = name if len(name) <= 34 else name[:15] + "…" + name[-18:]
        mb = (r["size_bytes"] or 0) / 1e6
        out.append(
            f"{r['rank']:>5}  {name:<34} {mb:>7.2f} {r['events']:>9} {r['gpu_kernels']:>8} {r['span_ms']:>10.3f}"
        )
    out.append("")
    cats = sorted({c for r in pr for c in r["events_by_category"]})
    out.append("events by category" + (" (summed over ranks)" if len(pr) > 1 else ""))
    for c in cats:
        tot = sum(r["events_by_category"].get(c, 0) for r in pr)
        out.append(f"  {c:<28} {tot:>10}")
    if facts["skipped_files"]:
        out.append("")
        out.append("skipped files")
        for s in facts["skipped_files"]:
            out.append(f"  {Path(s['file']).name}: {s['reason']}")
    out.append("")
    sev = facts["findings_by_severity"]
    out.append(
        f"findings {sev['error']} error(s), {sev['warning']} warning(s), {sev['info']} note(s)  (details: holotrace doctor)"
    )
    for f in facts["findings"]:
        if f["severity"] in ("error", "warning"):
            where = f" [rank {f['rank']}]" if f["rank"] is not None else ""
            out.append(f"  {f['severity'].upper()} {f['code']}{where}: {f['message']}")
    return "\n".join(out)


def _steps_text(steps: list[int]) -> str:
    return fmt_steps(steps, listed=12)
