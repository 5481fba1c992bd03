"""The interface every ``holotrace`` subcommand implements.

A command module defines ``add_arguments(parser)`` (its options), ``run(args)``
(parse → analysis → render, returning the exit code) and one module-level
``COMMAND = Command(...)`` that names it. :mod:`holotrace.commands` lists every
command as an :class:`Entry` (its name and one-line help) and :mod:`holotrace.cli`
builds its parser from that list, importing only the module of the command that
runs: ``holotrace --help`` and ``--version`` import none of them.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Command", "Entry"]


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


@dataclass(frozen=True)
class Entry:
    """A command as the registry lists it: what ``holotrace --help`` shows without importing the command.

    Attributes:
        name: what the user types; the module is ``holotrace.commands.<name with - as _>``.
        help: the one-line help, the same as the module's ``COMMAND.help`` (a test checks).
    """

    name: str
    help: str

    @property
    def module(self) -> str:
        return "holotrace.commands." + self.name.replace("-", "_")

    def load(self) -> Command:
        """The command itself (imports its module; an import error is raised, never hidden)."""
        command = importlib.import_module(self.module).COMMAND
        if command.name != self.name:
            raise ImportError(f"{self.module} defines the command {command.name!r}, not {self.name!r}")
        return command

    def register_help_only(self, subparsers: Any) -> argparse.ArgumentParser:
        """Add this command by name and help line only (for the list in ``holotrace --help``)."""
        return subparsers.add_parser(self.name, help=self.help)
