"""The ``holotrace`` command ends its process without tearing the interpreter down (``cli.command``): what must run
at exit still runs (the cache's background writes), the exit status is the command's, and nothing printed is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hta_trace_filter_2rank"
COMMAND = "import sys; from holotrace.cli import command; sys.argv[0] = 'holotrace'; command()"


def _holotrace(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOLOTRACE_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-c", COMMAND, *args], capture_output=True, text=True, env=env, timeout=300)


def test_a_cold_command_leaves_complete_cache_entries(tmp_path):
    r = _holotrace("summary", str(EXAMPLE), "--format", "json", cache=tmp_path / "cache")
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["costliest_rank"]  # the whole JSON document was written out, to its last key
    entries = [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    assert len(entries) == 2  # one per file, each written to the end by the background writer
    for e in entries:
        assert json.loads((e / "info.json").read_text())["bytes"] == (e / "columns.bin").stat().st_size
    again = _holotrace("summary", str(EXAMPLE), "--format", "json", cache=tmp_path / "cache")
    assert again.returncode == r.returncode and again.stdout == r.stdout


def test_exit_status_of_bad_input_and_usage(tmp_path):
    missing = _holotrace("summary", str(tmp_path / "nowhere"), cache=tmp_path / "cache")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1 and "nowhere" in missing.stderr
    usage = _holotrace("summary", str(EXAMPLE), "--no-such-option", cache=tmp_path / "cache")
    assert usage.returncode == 2 and "--no-such-option" in usage.stderr
    version = _holotrace("--version", cache=tmp_path / "cache")
    assert version.returncode == 0 and version.stdout.strip()
