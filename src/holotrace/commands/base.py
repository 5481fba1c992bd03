"""The interface every ``holotrace`` subcommand implements.

A command module defines ``add_arguments(parser)`` (its options), ``run(args)``
(parse → analysis → render, returning the exit code) and one module-level
``COMMAND = Command(...)`` that names it. :mod:`holotrace.commands` lists every
``COMMAND`` explicitly and :mod:`holotrace.cli` builds its parser from that list.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Command"]


@dataclass(frozen=True)
class Command:
    """One subcommand.

    Attributes:
        name: what the user types (``holotrace NAME``).
        help: one line shown in ``holotrace --help``.
        description: the paragraph shown in ``holotrace NAME --help``.
        add_arguments: adds the command's options to its parser.
        run: does the work for parsed arguments and returns the exit code.
    """

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Any]

    def register(self, subparsers: Any) -> argparse.ArgumentParser:
        """Add this command to ``subparsers`` (from ``ArgumentParser.add_subparsers``)."""
        p = subparsers.add_parser(self.name, help=self.help, description=self.description)
        self.add_arguments(p)
        p.set_defaults(run=self.run)
        return p
