"""Fixtures of the scale-out tests: a generated 16-rank job, the bundled jobs, a local Ray cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from corpus import REPO


@pytest.fixture(scope="session")
def job16(tmp_path_factory) -> Path:
    """16 small ranks (about 0.3 MB each), rank 5 a straggler."""
    out = tmp_path_factory.mktemp("job16")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "generate.py"),
            "--out",
            str(out),
            "--ranks",
            "16",
            "--target-mb",
            "0.3",
            "--steps",
            "2",
            "--straggler-rank",
            "5",
            "--jobs",
            "2",
        ],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="session")
def job16_corrupt(job16, tmp_path_factory) -> Path:
    """The 16-rank job with rank 7 cut in the middle of its events and rank 9 unreadable after its header."""
    out = tmp_path_factory.mktemp("job16bad")
    for f in job16.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    b = (out / "rank-7.pt.trace.json").read_bytes()
    (out / "rank-7.pt.trace.json").write_bytes(b[: len(b) * 6 // 10])
    p = out / "rank-9.pt.trace.json"
    b = p.read_bytes()
    i = b.index(b'"traceEvents"')
    p.write_bytes(
        b[:i] + b'"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "name": "a", "cat": "kernel", ' + b"\x00" * 50
    )
    return out


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster of 2 CPUs for the session (the tests skip without the ray extra)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install '.[ray]' runs these tests")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
