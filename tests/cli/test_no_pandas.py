"""The everyday commands (``summary``, ``advise``, ``stragglers``) and the HTML ``report`` run on numpy alone: pandas
(and the pyarrow it pulls in) costs 0.2 s and ~75 MB of every process that imports it, so it is imported only where a
pandas frame is asked for (the HTA-compatible API, CSV/Parquet files, the scale-out store).

Each command runs in a fresh interpreter; an import hook names the module that imported pandas first, so a
failure says where to look."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hta_trace_filter_2rank"

SCRIPT = textwrap.dedent("""
    import builtins, contextlib, io, json, sys
    first = {}
    real_import = builtins.__import__

    def hook(name, globals=None, *args, **kwargs):
        top = name.partition(".")[0]
        if top in ("pandas", "pyarrow") and top not in first:
            importer = (globals or {}).get("__name__", "?")
            if not importer.startswith(("pandas", "pyarrow")):
                first[top] = importer
        return real_import(name, globals, *args, **kwargs)

    builtins.__import__ = hook
    from holotrace.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(sys.argv[1:])
        except SystemExit as e:
            code = e.code
    print(json.dumps({
        "code": code,
        "printed": len(out.getvalue()),
        "loaded": sorted(m for m in ("pandas", "pyarrow") if m in sys.modules),
        "first": first,
        "process_pool": "multiprocessing" in sys.modules,
    }))
""")


def _run(args: list[str], cache: Path) -> dict:
    env = dict(os.environ, HOLOTRACE_CACHE_DIR=str(cache))
    r = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["summary"],
        ["summary", "--format", "json"],
        ["advise"],
        ["advise", "--format", "json"],
        ["stragglers"],
    ],
    ids=lambda a: "-".join(a).replace("--", ""),
)
def test_command_runs_without_pandas(args, tmp_path):
    got = _run([*args, str(EXAMPLE)], tmp_path / "cache")
    assert got["code"] in (0, 1), got
    assert got["printed"] > 0, "the command printed nothing"
    assert got["loaded"] == [], f"holotrace {' '.join(args)} imported {got['loaded']}, first from {got['first']}"


def test_the_report_renders_without_pandas(tmp_path):
    got = _run(["report", str(EXAMPLE), "-o", str(tmp_path / "r.html")], tmp_path / "cache")
    assert got["code"] == 0, got
    assert got["loaded"] == [], f"holotrace report imported {got['loaded']}, first from {got['first']}"
    assert (tmp_path / "r.html").stat().st_size > 0


def test_the_check_sees_pandas_where_it_is_imported(tmp_path):
    # CSV files are written by pandas: the hook must see it, or the tests above prove nothing
    got = _run(["summary", str(EXAMPLE), "--output", str(tmp_path / "out"), "--output-format", "csv"], tmp_path / "c")
    assert got["code"] in (0, 1), got
    assert "pandas" in got["loaded"] and got["first"].get("pandas", "").startswith("holotrace"), got


def test_a_cached_summary_starts_no_process_pool_machinery(tmp_path):
    # the process pool's modules (multiprocessing, concurrent.futures.process: ~35 ms) are imported only where a
    # pool starts; a summary read from the cache runs in this process
    _run(["summary", str(EXAMPLE)], tmp_path / "cache")
    got = _run(["summary", str(EXAMPLE)], tmp_path / "cache")
    assert got["code"] in (0, 1) and got["process_pool"] is False, got
