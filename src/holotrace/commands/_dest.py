"""Where a command writes: declared with its options, checked before any work is done.

A command declares each option that names something it writes (``writes(parser, "output", "file")``);
:func:`check_destinations` checks every declared destination the user gave (:mod:`holotrace.atomic`) before
the command runs, so a missing folder, a folder where a file is meant, a device or a read-only place is a
one-line error at once, not a traceback after a long load.
"""

from __future__ import annotations

import argparse

__all__ = ["writes", "check_destinations"]

_KEY = "_holotrace_writes"


def writes(p: argparse.ArgumentParser, dest: str, kind: str, example: str = "") -> None:
    """Declare that option ``dest`` of parser ``p`` names a ``"file"`` or a ``"folder"`` the command writes."""
    if kind not in ("file", "folder"):
        raise ValueError(kind)
    flag = next((a.option_strings[-1] for a in p._actions if a.dest == dest and a.option_strings), f"--{dest}")
    p.set_defaults(**{_KEY: tuple(p.get_default(_KEY) or ()) + ((dest, kind, flag, example),)})


def check_destinations(args: argparse.Namespace) -> None:
    """Raise :class:`holotrace.errors.OutputError` for the first declared destination that cannot be written."""
    from holotrace.atomic import check_file, check_folder

    for dest, kind, flag, example in getattr(args, _KEY, ()) or ():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if kind == "file":
            check_file(value, what=f"{flag} file", example=example or "out")
        else:
            check_folder(value, what=f"{flag} folder")
