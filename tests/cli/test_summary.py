"""``holotrace summary`` as a user runs it: a subprocess, real output, files written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hta_trace_filter_2rank"
TESTS = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run([sys.executable, "-m", "holotrace.cli", "summary", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def example():
    if not EXAMPLE.is_dir():
        pytest.skip("examples/hta_trace_filter_2rank is not in this checkout")
    return EXAMPLE


def test_table_answers_where_the_time_went_in_80_columns(example):
    r = run(str(example), "--no-cache")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for title in (
        "GPU time per rank",
        "Idle time by cause",
        "Communication hidden behind compute",
        "GPU time by kernel type",
        "Top 10 kernels",
        "Slowest rank",
        "Findings that affect these numbers",
    ):
        assert title in out
    assert max(len(line) for line in out.splitlines()) <= 80
    # rank 0 over the whole trace: idle 675.191 of 1222.847 ms = 55.2 %; 59.216 of 396.199 ms of NCCL hidden = 14.9 %
    assert "1,222.85" in out and "55.2" in out and "14.9" in out
    assert "world_size is 128" in out  # the missing ranks are reported beside cross-rank numbers


def test_json_has_full_results(example):
    r = run(str(example), "--format", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["meta"]["ranks"] == [0, 1] and doc["meta"]["steps"] == [551, 552]
    t0 = doc["temporal"][0]
    assert (t0["span_us"], t0["busy_us"], t0["idle_us"], t0["compute_us"]) == (1222847.0, 547656.0, 675191.0, 210320.0)
    o0 = doc["overlap"][0]
    assert (o0["comm_us"], o0["overlap_us"], o0["has_communication"]) == (396199.0, 59216.0, True)
    # per step: step 551 of rank 0 equals HTA's temporal breakdown (which keeps only that step)
    s = [r for r in doc["temporal_by_step"] if r["rank"] == 0 and r["step"] == 551][0]
    assert (s["span_us"], s["idle_us"], s["compute_us"], s["non_compute_us"]) == (
        600058.0,
        321378.0,
        106252.0,
        172428.0,
    )
    assert {r["idle_category"] for r in doc["idle"]} == {"host_wait", "kernel_wait", "other"}


def test_csv_and_markdown(example):
    r = run(str(example), "--format", "csv", "--no-cache")
    assert r.returncode == 0 and r.stdout.startswith("# temporal\nrank,gpu_events,span_us,")
    m = run(str(example), "--format", "markdown", "--no-cache")
    assert m.returncode == 0 and "| rank | span ms |" in m.stdout and "### GPU time per rank" in m.stdout


def test_output_dir_writes_every_analysis(example, tmp_path):
    out = tmp_path / "out"
    r = run(str(example), "--output", str(out), "--output-format", "csv,parquet,json", "--no-cache")
    assert r.returncode == 0, r.stderr
    for key in (
        "temporal",
        "temporal_by_step",
        "kernel_types",
        "kernel_stats",
        "kernel_rank_distribution",
        "idle",
        "idle_interval_stats",
        "overlap",
        "steps",
        "findings",
    ):
        for ext in ("csv", "parquet", "json"):
            assert (out / f"{key}.{ext}").is_file(), f"{key}.{ext}"
    pq = pd.read_parquet(out / "temporal.parquet")
    csv = pd.read_csv(out / "temporal.csv")
    assert pq["idle_us"].tolist() == csv["idle_us"].tolist() == [675191.0, 651136.0]
    assert "wrote 33 file(s) to" in r.stdout  # 11 tables × 3 formats


def test_bad_output_format_is_one_line(example, tmp_path):
    r = run(str(example), "--output", str(tmp_path / "o"), "--output-format", "xlsx", "--no-cache")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "xlsx" in r.stderr


def test_cpu_only_trace_and_missing_path(tmp_path):
    sys.path.insert(0, str(TESTS))
    from tracebuilder import TraceBuilder

    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::add", 0, 10)
    path = tb.write(tmp_path / "cpu.json")
    r = run(str(path), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "no GPU activity" in r.stdout and "no communication kernels" in r.stdout
    missing = run(str(tmp_path / "nope"), "--no-cache")
    assert missing.returncode == 2 and "nope" in missing.stderr
