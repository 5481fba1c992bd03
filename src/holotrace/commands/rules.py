"""``holotrace rules PATH``: what the tool thinks the job does, and which rule said so.

The job's top GPU kernels (by time) with their type, collective kind and the rule that classified each
(a kernel-name rule, or an op rule when the kernel was launched under a collective operator), the CPU
operators that are collectives, and the large kernels that no rule claimed (computation by default: check
that they are). ``--rules FILE`` adds a user's rules before the built-in table (docs/rules.md).
"""

from __future__ import annotations

import argparse

from holotrace.analysis import classification as _cls
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view

__all__ = ["COMMAND", "add_arguments", "build_report", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument("--top", type=int, default=20, metavar="N", help="kernels shown (default 20)")
    p.add_argument(
        "--min-share",
        type=float,
        default=1.0,
        metavar="PCT",
        help="flag kernels no rule claimed that take at least PCT %% of GPU time (default 1)",
    )


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    return emit(build_report(job, top=args.top, min_share=args.min_share), args)


def build_report(job, *, top: int = 20, min_share: float = 1.0) -> Report:
    """The kernels with their rules, the CPU collectives, the large unclaimed kernels (pure)."""
    view = job_view(job, NATIVE)
    kernels = _cls.kernel_rules(view, rules=NATIVE)
    ops = _cls.op_rules(view, rules=NATIVE)
    unclaimed = _cls.unclaimed_share(kernels)
    comm = float(kernels.loc[kernels["kernel_type"] == "COMMUNICATION", "share"].sum()) if len(kernels) else 0.0
    files = ", ".join(view.table.files) if view.table is not None and view.table.files else "none"
    header = [
        f"job     {job.path}",
        f"ranks   {len(job.ranks)}",
        f"rules   built-in table; user rules: {files}",
        f"GPU time {kernels['time_us'].sum() / 1e3:.3f} ms: communication {comm:.1f} %, "
        f"claimed by no rule {unclaimed:.1f} %",
    ]

    def shown(df, cols):
        return df.head(top)[cols].copy()  # full names: the table shortens them (never two alike), --wide not

    kcols = ["name", "kernel_type", "comm_kind", "rule", "evidence", "count", "time_us", "share"]
    big = kernels[(kernels["evidence"] == "no rule") & (kernels["share"] >= min_share)]
    sections = [
        Section(
            "kernels",
            f"Top {top} GPU kernels and the rule that classified each",
            shown(kernels, kcols),
            digits={"time_us": 1, "share": 1},
            notes=[
                "evidence: 'name' = a kernel rule matched the name; 'launched under' = launched inside a "
                "collective op an op rule matched; 'no rule' = computation by default"
            ],
        ),
        Section(
            "collective_ops",
            "CPU operators and annotations that are collectives",
            shown(ops, list(ops.columns)),
            digits={"time_us": 1},
            lines=[] if len(ops) else ["no operator or annotation matched an op rule"],
        ),
        Section(
            "unclaimed",
            f"Kernels no rule claimed, at least {min_share:g} % of GPU time",
            shown(big, ["name", "count", "time_us", "share"]),
            digits={"time_us": 1, "share": 1},
            lines=[] if len(big) else [f"none: every kernel over {min_share:g} % of GPU time was claimed by a rule"],
            notes=["counted as computation; if one is a collective, add a rule (holotrace rules --help, docs/rules.md)"]
            if len(big)
            else [],
        ),
    ]
    return Report(
        title="Classification rules",
        sections=sections,
        header=header,
        data={"kernels": kernels, "collective_ops": ops},
        meta={
            "path": job.path,
            "ranks": job.ranks,
            "unclaimed_share": unclaimed,
            "communication_share": comm,
            "user_rules": list(view.table.files) if view.table else [],
        },
    )


COMMAND = Command(
    name="rules",
    help="which rule classified each kernel (communication, memory, computation), and what no rule claimed",
    description="The job's top GPU kernels by time with their type, collective kind and the rule that classified "
    "each: a kernel-name rule of the rule table, or an op rule when the kernel was launched under a "
    "collective operator (c10d::*, nccl:*, gloo:*, symm_mem::*, vllm::all_reduce, record_param_comms). "
    "Also the CPU operators that are collectives, and the large kernels no rule claimed (counted as "
    "computation). Add rules with --rules FILE or $HOLOTRACE_RULES (format: docs/rules.md). "
    "Times in microseconds (us), shares in % of GPU time.",
    add_arguments=add_arguments,
    run=run,
)
