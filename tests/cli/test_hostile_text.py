"""Names carrying terminal control sequences (ESC/CSI, OSC window titles, BEL, C1 CSI, bidirectional
overrides) pass through the one sanitiser at the rendering boundary: every command, every display format,
the report and the files written; nothing reaches a terminal raw, and the data files keep the full name."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from screen import COMMANDS, run_command
from tracebuilder import TraceBuilder

EVIL = [
    "gemm\x1b[2J\x1b]0;owned\x07<float>(float*)",
    "aten::mm\x1b[31m",
    "step\x9b1m\u202eeman",
    "nccl\x1b]8;;http://x\x1b\\Kernel",
]
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # all but tab and newline


def _job(folder):
    for r in (0, 1):
        tb = TraceBuilder(rank=r, world_size=2)
        for i, t0 in enumerate((0, 2000)):
            tb.annotation(f"ProfilerStep#{i + 1}", t0, 1900)
            tb.annotation(EVIL[2], t0 + 5, 800)
            tb.cpu_op(EVIL[1], t0 + 10, 300)
            tb.launch_kernel(EVIL[0], t0 + 20, 5, t0 + 40, 200)
            tb.launch_kernel(EVIL[0], t0 + 30, 5, t0 + 250, 100)
            tb.launch_kernel(EVIL[3], t0 + 400, 5, t0 + 420 + 100 * r, 500, stream=20)
        tb.write(folder)
    return folder


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return _job(tmp_path_factory.mktemp("hostile"))


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "csv"])
def test_every_command_and_format_escapes_control_characters(job, tmp_path, monkeypatch, fmt):
    monkeypatch.setenv("HOLOTRACE_CACHE_DIR", str(tmp_path / "cache"))
    seen = set()
    for command, extra in COMMANDS:
        options = () if command in ("info", "doctor", "report") else ("--format", fmt)
        if command in ("info", "doctor") and fmt == "json":
            options = ("--json",)
        run = run_command(command, extra, job, tmp_path, options=options)
        assert run.code in (0, 1), (command, run.code, run.err)
        for stream in (run.out, run.err):
            assert not RAW.search(stream), (command, fmt, RAW.findall(stream)[:5])
        if re.search(r"\\(x1b|x9b|u001b|u009b|u202e)", run.out):
            seen.add(command)
    # the names did reach the output, escaped (summary, launches, sequences, annotations, advise, diff ...)
    assert {"summary", "launches", "advise", "diff"} <= seen, seen


def test_the_report_escapes_control_characters(job, tmp_path, monkeypatch):
    monkeypatch.setenv("HOLOTRACE_CACHE_DIR", str(tmp_path / "cache"))
    run = run_command("report", ["-o", "{out}/r.html"], job, tmp_path)
    assert run.code == 0, run.err
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert not RAW.search(html), RAW.findall(html)[:5]
    assert "\\x1b" in html


def test_files_keep_the_full_name_and_json_escapes_it(job, tmp_path, monkeypatch):
    monkeypatch.setenv("HOLOTRACE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    run = run_command("summary", ["--output", str(out), "--output-format", "csv,json,parquet"], job, tmp_path)
    assert run.code == 0, run.err
    assert EVIL[0] in pd.read_parquet(out / "kernel_stats.parquet")["name"].tolist()
    text = (out / "kernel_stats.json").read_text(encoding="utf-8")
    assert not RAW.search(text) and EVIL[0] in [r["name"] for r in json.loads(text)]
