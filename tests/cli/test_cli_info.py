"""The command as a user runs it: a subprocess, real output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hta_trace_filter_2rank"


def run(*args):
    return subprocess.run([sys.executable, "-m", "holotrace.cli", *args], capture_output=True, text=True)


def test_info_json_on_example():
    r = run("info", str(EXAMPLE), "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)
    assert facts["ranks"] == [0, 1] and facts["world_size"] == 128
    r0 = facts["per_rank"][0]
    assert r0["events_by_category"]["kernel"] == 1154 and r0["steps"] == [551, 552]
    assert any(f["code"] == "missing_ranks" for f in facts["findings"])


def test_info_table_fits_80_columns():
    r = run("info", str(EXAMPLE))
    assert r.returncode == 0
    assert "ranks    0-1" in r.stdout and "missing_ranks" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines() if "missing_ranks" not in line) <= 80


def test_doctor_exit_codes(tmp_path):
    r = run("doctor", str(EXAMPLE))
    assert r.returncode == 1 and "missing_ranks" in r.stdout and "FAIL" in r.stdout  # 126 of 128 ranks absent
    one = tmp_path / "one"
    one.mkdir()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tracebuilder import TraceBuilder

    tb = TraceBuilder(rank=0, world_size=1)
    tb.annotation("ProfilerStep#1", 0, 100)
    tb.launch_kernel("gemm", 10, 5, 20, 30)
    tb.write(one)
    r = run("doctor", str(one), "--json")
    assert r.returncode == 0, r.stdout
    assert json.loads(r.stdout)["ok"] is True


def test_help_and_cache_commands(tmp_path):
    r = run("--help")
    assert r.returncode == 0 and "doctor" in r.stdout and "info" in r.stdout
    r = run("cache", "clear", "--cache-dir", str(tmp_path / "c"))
    assert r.returncode == 0 and "removed 0" in r.stdout


def test_control_characters_in_a_path_are_escaped_in_the_error_line(tmp_path, capsys):
    from holotrace.cli import main

    bad = tmp_path / "evil\x1b]0;title\x07.json"
    bad.write_text("not json at all", encoding="utf-8")
    assert main(["info", str(bad), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "evil\\x1b]0;title\\x07.json" in err and len(err.strip().splitlines()) == 1
