"""The command registry: every command module is listed, every listed command parses, a broken one fails loudly,
and the help and version import no command (nor numpy, pandas or pyarrow)."""

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
from holotrace.commands.base import Command, Entry

PACKAGE_DIR = Path(commands_pkg.__file__).resolve().parent
NAMES = [c.name for c in COMMANDS]
MODULES = [c.name.replace("-", "_") for c in COMMANDS]  # a command "a-b" lives in commands/a_b.py
HELPERS = {"base"}  # public modules of the package that are not commands


def _module_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(PACKAGE_DIR)]))


def test_every_command_module_is_registered():
    registered = {c.load().run.__module__ for c in COMMANDS}
    for name in _module_names():
        if name.startswith("_") or name in HELPERS:
            continue
        mod = import_module(f"holotrace.commands.{name}")
        cmd = getattr(mod, "COMMAND", None)
        assert isinstance(cmd, Command), f"holotrace/commands/{name}.py defines no COMMAND = Command(...)"
        assert Entry(cmd.name, cmd.help) in COMMANDS, (
            f"holotrace/commands/{name}.py is not listed in holotrace.commands.COMMANDS, or its help line differs from "
            f"its Entry there (the CLI lists commands from the Entry without importing them): update the Entry"
        )
        assert cmd.name.replace("-", "_") == name, (
            f"the command in {name}.py is called {cmd.name!r}; name the module after it"
        )
        assert f"holotrace.commands.{name}" in registered


def test_no_command_defined_outside_the_registry():
    # text check too, so a module that only fails to import still counts as defining a command
    pattern = re.compile(r"^COMMAND\s*(:[^=]*)?=", re.M)
    defining = sorted(p.stem for p in PACKAGE_DIR.glob("*.py") if pattern.search(p.read_text(encoding="utf-8")))
    assert defining == sorted(MODULES)


def test_registry_is_consistent():
    assert len(NAMES) == len(set(NAMES)) >= 8
    assert {"info", "doctor", "summary", "launches", "sequences", "annotations", "stragglers", "cache"} <= set(NAMES)
    for entry in COMMANDS:
        c = entry.load()
        assert c.run.__module__ == entry.module == f"holotrace.commands.{c.name.replace('-', '_')}"
        assert c.help == entry.help, (
            f"the help line of {c.name} differs from its Entry in commands/__init__.py: update the Entry"
        )
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
    cmd = next(c for c in COMMANDS if c.name == name).load()
    assert " ".join(cmd.description.split()[:4]) in " ".join(out.split())


def test_parser_dispatches_to_the_registered_run(tmp_path, capsys):
    args = build_parser().parse_args(["cache", "dir", "--cache-dir", str(tmp_path)])
    assert args.run is next(c for c in COMMANDS if c.name == "cache").load().run
    assert main(["cache", "dir", "--cache-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path)


def test_an_import_error_in_a_command_is_not_skipped():
    """Break each command module (and, for one, a module it imports) in turn: the command must fail with that
    import error, from the CLI and from the full parser, and still be listed by ``holotrace --help``."""
    cases = [(n, f"holotrace.commands.{n.replace('-', '_')}") for n in NAMES] + [
        ("launches", "holotrace.analysis.launches")
    ]
    script = textwrap.dedent(f"""
        import contextlib, importlib.abc, io, json, sys
        results = {{}}
        for name, target in {cases!r}:
            class Broken(importlib.abc.MetaPathFinder):
                def find_spec(self, fullname, path, target_=None, _t=target):
                    if fullname == _t:
                        raise ImportError("simulated breakage of " + _t)
                    return None
            for m in [m for m in sys.modules if m == "holotrace" or m.startswith("holotrace.")]:
                del sys.modules[m]
            finder = Broken()
            sys.meta_path.insert(0, finder)
            got = []
            try:
                import holotrace.cli
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    try:
                        holotrace.cli.main(["--help"])
                    except SystemExit:
                        pass
                listed = any("\\n    " + name + end in out.getvalue() for end in (" ", "\\n"))
                got.append("listed" if listed else "missing from the help")
                for call in (lambda: holotrace.cli.main([name, "--help"]), holotrace.cli.build_parser):
                    try:
                        call()
                        got.append("ran")
                    except ImportError as e:
                        got.append(str(e))
                    except SystemExit:
                        got.append("ran")
            except ImportError as e:
                got.append("the CLI itself: " + str(e))
            finally:
                sys.meta_path.remove(finder)
            results[name + " " + target] = got
        print(json.dumps(results))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert results == {
        f"{n} {t}": ["listed", f"simulated breakage of {t}", f"simulated breakage of {t}"] for n, t in cases
    }


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_version_and_help_import_no_command_nor_numpy_pandas_pyarrow(argv):
    """``holotrace --version`` / ``--help`` / no command start quickly: no command module, no heavy library."""
    script = textwrap.dedent(f"""
        import json, sys
        from holotrace.cli import main
        try:
            main({argv!r})
        except SystemExit:
            pass
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "pandas", "pyarrow", "msgspec")
                       or (m.startswith("holotrace.commands.") and m != "holotrace.commands.base"))
        print(json.dumps(heavy))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []


def test_import_holotrace_is_light_and_its_names_resolve_on_use():
    script = textwrap.dedent("""
        import json, sys
        import holotrace
        before = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "pandas", "pyarrow"))
        from holotrace import Job, TraceAnalysis, load
        from holotrace.model.job import Job as J
        ok = [callable(load), Job is J, TraceAnalysis.__name__ == "TraceAnalysis", "load" in dir(holotrace)]
        print(json.dumps([before, ok, "numpy" in sys.modules]))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [[], [True, True, True, True], True]


def test_an_unknown_attribute_is_an_attribute_error():
    import holotrace

    with pytest.raises(AttributeError, match="no_such_name"):
        holotrace.no_such_name  # noqa: B018
