"""The command registry: every command module is listed, every listed command parses, a broken one fails loudly."""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
import sys
import textwrap
from importlib import import_module
from pathlib import Path

import pytest

import holotrace.commands as commands_pkg
from holotrace.cli import build_parser, main
from holotrace.commands import COMMANDS
from holotrace.commands.base import Command

PACKAGE_DIR = Path(commands_pkg.__file__).resolve().parent
NAMES = [c.name for c in COMMANDS]
MODULES = [c.name.replace("-", "_") for c in COMMANDS]  # a command "a-b" lives in commands/a_b.py
HELPERS = {"base"}  # public modules of the package that are not commands


def _module_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(PACKAGE_DIR)]))


def test_every_command_module_is_registered():
    registered = {c.run.__module__ for c in COMMANDS}
    for name in _module_names():
        if name.startswith("_") or name in HELPERS:
            continue
        mod = import_module(f"holotrace.commands.{name}")
        cmd = getattr(mod, "COMMAND", None)
        assert isinstance(cmd, Command), f"holotrace/commands/{name}.py defines no COMMAND = Command(...)"
        assert cmd in COMMANDS, f"holotrace/commands/{name}.py is not listed in holotrace.commands.COMMANDS"
        assert cmd.name.replace("-", "_") == name, f"the command in {name}.py is called {cmd.name!r}; name the module after it"
        assert f"holotrace.commands.{name}" in registered


def test_no_command_defined_outside_the_registry():
    # text check too, so a module that only fails to import still counts as defining a command
    pattern = re.compile(r"^COMMAND\s*(:[^=]*)?=", re.M)
    defining = sorted(p.stem for p in PACKAGE_DIR.glob("*.py") if pattern.search(p.read_text(encoding="utf-8")))
    assert defining == sorted(MODULES)


def test_registry_is_consistent():
    assert len(NAMES) == len(set(NAMES)) >= 8
    assert {"info", "doctor", "summary", "launches", "sequences", "annotations", "stragglers", "cache"} <= set(NAMES)
    for c in COMMANDS:
        assert c.run.__module__ == f"holotrace.commands.{c.name.replace('-', '_')}"
        assert c.help and c.description and callable(c.add_arguments)


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for c in COMMANDS:
        assert f"\n    {c.name}" in out, c.name


@pytest.mark.parametrize("name", NAMES)
def test_command_help_exits_zero(name, capsys):
    with pytest.raises(SystemExit) as e:
        main([name, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: holotrace {name} ")
    cmd = next(c for c in COMMANDS if c.name == name)
    assert " ".join(cmd.description.split()[:4]) in " ".join(out.split())


def test_parser_dispatches_to_the_registered_run(tmp_path, capsys):
    args = build_parser().parse_args(["cache", "dir", "--cache-dir", str(tmp_path)])
    assert args.run is next(c for c in COMMANDS if c.name == "cache").run
    assert main(["cache", "dir", "--cache-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path)


def test_an_import_error_in_a_command_is_not_skipped():
    """Break each command module (and, for one, a module it imports) in turn: importing the CLI must fail."""
    targets = [f"holotrace.commands.{n}" for n in MODULES] + ["holotrace.analysis.launches"]
    script = textwrap.dedent(f"""
        import importlib.abc, json, sys
        results = {{}}
        for target in {targets!r}:
            class Broken(importlib.abc.MetaPathFinder):
                def find_spec(self, name, path, target_=None, _t=target):
                    if name == _t:
                        raise ImportError("simulated breakage of " + _t)
                    return None
            for m in [m for m in sys.modules if m == "holotrace" or m.startswith("holotrace.")]:
                del sys.modules[m]
            finder = Broken()
            sys.meta_path.insert(0, finder)
            try:
                import holotrace.cli
                results[target] = "imported"
            except ImportError as e:
                results[target] = str(e)
            finally:
                sys.meta_path.remove(finder)
        print(json.dumps(results))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert results == {t: f"simulated breakage of {t}" for t in targets}
