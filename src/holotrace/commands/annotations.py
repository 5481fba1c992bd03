"""``holotrace annotations PATH``: time per user annotation, and the GPU work that ran under each.

User annotations are ``record_function`` ranges (``## forward ##``,
``Optimizer.step``, ``DistributedDataParallel.forward`` ...). PyTorch records
them on the CPU timeline (``user_annotation``) and, for GPU work, a copy on
the GPU timeline (``gpu_user_annotation``). By default the GPU copies are used
when the trace has them: time per annotation is then GPU time, and each
kernel is attributed to the innermost annotation it overlaps on its stream
(zero-length operations to the one containing their start). ``--cpu`` uses
the CPU ranges and attributes each kernel through its launch call.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from holotrace.analysis import annotations as _anno
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view

__all__ = ["COMMAND", "add_arguments", "build_report", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument(
        "--cpu", action="store_true", help="use the CPU user_annotation ranges (attribution via launch calls)"
    )
    p.add_argument("--top", type=int, default=15, metavar="N", help="annotations to show per table (default 15)")


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    return emit(build_report(job, cpu=args.cpu, top=args.top), args)


COMMAND = Command(
    name="annotations",
    help="time per user annotation (record_function ranges) and the GPU time under each",
    description="Per rank: count and total/mean/min/max time of every user annotation, and the GPU work "
    "(kernels, memcpy, memset) attributed to its innermost annotation. Uses the GPU-timeline copies "
    "of the annotations when the trace has them, the CPU ranges otherwise (or with --cpu). Times in "
    "milliseconds (ms).",
    add_arguments=add_arguments,
    run=run,
)


def build_report(job, *, cpu: bool = False, top: int = 15) -> Report:
    """Annotation time and attributed GPU time; falls back to CPU ranges when there are no GPU copies."""
    has_gpu = job.strings.id("gpu_user_annotation") >= 0
    gpu = has_gpu and not cpu
    header = [
        f"job     {job.path}",
        f"ranks   {len(job.ranks)}",
        f"source  {'gpu_user_annotation (GPU timeline)' if gpu else 'user_annotation (CPU timeline)'}",
    ]
    if not cpu and not has_gpu:
        header.append("note    the trace has no GPU-timeline annotations; using the CPU ranges")
    view = job_view(job, NATIVE)
    times = _anno.annotation_time(view, rules=NATIVE, gpu=gpu)
    kt = _anno.kernel_time_by_annotation(view, rules=NATIVE, gpu=gpu)
    shown_t = pd.DataFrame(
        {
            "rank": times["rank"].to_numpy(),
            "annotation": times["name"].to_numpy(),
            "count": times["count"].to_numpy(),
            "total ms": times["sum_us"].to_numpy() / 1e3,
            "mean ms": times["mean_us"].to_numpy() / 1e3,
            "max ms": times["max_us"].to_numpy() / 1e3,
        }
    ).sort_values(["total ms", "rank"], ascending=[False, True], kind="stable")
    kshow = pd.DataFrame(
        {
            "rank": kt["rank"].to_numpy(),
            "annotation": np.where(kt["annotation"].to_numpy() == "", "(none)", kt["annotation"].to_numpy()),
            "ops": kt["kernels"].to_numpy(),
            "GPU ms": kt["kernel_time_us"].to_numpy() / 1e3,
        }
    ).sort_values(["GPU ms", "rank"], ascending=[False, True], kind="stable")
    what = "GPU" if gpu else "CPU"
    sections = [
        Section(
            "annotation_time",
            f"Time per user annotation ({what} ranges)",
            shown_t,
            max_rows=top,
            digits={"total ms": 3, "mean ms": 3, "max ms": 3},
            lines=[] if len(shown_t) else ["the trace has no user annotations"],
        ),
        Section(
            "gpu_time_by_annotation",
            "GPU work under each annotation (innermost)",
            kshow,
            max_rows=top,
            digits={"GPU ms": 3},
            notes=["ops = kernels, memcpy and memset; (none) = not under any annotation"],
            lines=[] if len(kshow) else ["no GPU work"],
        ),
    ]
    meta = {"path": job.path, "ranks": list(job.ranks), "source": "gpu" if gpu else "cpu"}
    return Report(
        title="holotrace annotations: time per user annotation",
        sections=sections,
        header=header,
        data={"annotation_time": times, "gpu_time_by_annotation": kt},
        meta=meta,
    )
