"""One module per ``holotrace`` subcommand, each exposing a :class:`~holotrace.commands.base.Command`.

:data:`COMMANDS` is the registry, in the order ``holotrace --help`` lists them: each
:class:`~holotrace.commands.base.Entry` is a command's name and one-line help, so that the
list costs no import. A new command is a module here (named after the command, ``-`` as
``_``) with ``add_arguments``, ``run`` and ``COMMAND``, plus one ``Entry`` below. The CLI
imports the module of the command that runs; a command whose module fails to import fails
loudly when run (and in the tests), it never vanishes from the help.
"""

# no ``from __future__ import annotations`` here: it would shadow the ``annotations`` command module

from holotrace.commands.base import Command, Entry

__all__ = ["COMMANDS", "Command", "Entry"]

COMMANDS: tuple[Entry, ...] = (
    Entry("info", "ranks, files, devices, events by category, steps, time span, findings"),
    Entry("doctor", "check a job: missing/duplicate ranks, damaged files, clock skew, ..."),
    Entry("summary", "where the GPU time went: per-rank breakdown, idle causes, overlap, top kernels, slowest rank"),
    Entry("launches", "kernel launch statistics: launch time, GPU time, launch delay and their outliers"),
    Entry("sequences", "most frequent GPU kernel sequences launched under an operator or annotation"),
    Entry("annotations", "time per user annotation (record_function ranges) and the GPU time under each"),
    Entry("stragglers", "which rank the others wait for in collectives, per step, with the evidence"),
    Entry(
        "critical-path",
        "critical path of each step: how much of it is CPU, GPU compute, communication, launch and gap overhead",
    ),
    Entry(
        "advise",
        "what to fix first in the whole job: fixes ranked by the job step time they save on a replay of all ranks",
    ),
    Entry("diff", "compare two runs: what got slower or faster and why; --fail-on rules for a CI gate (exit 1)"),
    Entry("memory", "device memory: peak allocated/reserved per rank and device, operators live at the peak"),
    Entry("counters", "launch-queue length per stream, time blocked on a full queue, memory-copy bandwidth"),
    Entry("cupti", "GPU performance counters (CUPTI range profiler) per operator: FLOPs, arithmetic intensity"),
    Entry("rules", "which rule classified each kernel (communication, memory, computation), and what no rule claimed"),
    Entry(
        "report",
        "one self-contained HTML report of the job (opens offline): findings, GPU time, steps, kernels, timeline",
    ),
    Entry(
        "timeline",
        "merge every rank into one Chrome-trace file on the common clock, findings as instant events (Perfetto)",
    ),
    Entry("cache", "show (the default), locate or clear the cache of decoded traces"),
    Entry(
        "ingest", "read a job's ranks (or a range of them) into per-rank Arrow tables and summaries, for 'summary DIR'"
    ),
)
