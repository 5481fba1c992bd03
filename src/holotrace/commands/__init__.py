"""One module per ``holotrace`` subcommand, each exposing a :class:`~holotrace.commands.base.Command`.

:data:`COMMANDS` is the registry, in the order ``holotrace --help`` lists them.
A new command is a module here with ``add_arguments``, ``run`` and ``COMMAND``,
imported below and appended to the tuple. The imports are plain on purpose: a
command that fails to import makes ``holotrace`` (and the tests) fail, it never
vanishes from the help.
"""

# no ``from __future__ import annotations`` here: it would shadow the ``annotations`` command module

from holotrace.commands import advise, annotations, cache, counters, cupti, critical_path, diff, doctor, info, ingest, launches, memory, report, rules, sequences, stragglers, summary, timeline
from holotrace.commands.base import Command

__all__ = ["COMMANDS", "Command"]

COMMANDS: tuple[Command, ...] = (
    info.COMMAND,
    doctor.COMMAND,
    summary.COMMAND,
    launches.COMMAND,
    sequences.COMMAND,
    annotations.COMMAND,
    stragglers.COMMAND,
    critical_path.COMMAND,
    advise.COMMAND,
    diff.COMMAND,
    memory.COMMAND,
    counters.COMMAND,
    cupti.COMMAND,
    rules.COMMAND,
    report.COMMAND,
    timeline.COMMAND,
    cache.COMMAND,
    ingest.COMMAND,
)
