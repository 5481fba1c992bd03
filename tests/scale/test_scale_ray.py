"""The same map/reduce on a local Ray cluster (2 CPUs): every frame identical to the local pool's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from corpus import BUNDLED
from frames_check import assert_frames_equal, is_table
from holotrace.exec.executor import LocalExecutor, TaskFailed
from holotrace.findings import FindingCode
from holotrace.scale import ingest, read_ingest, summarize

pytestmark = pytest.mark.ray


def _ray_executor():
    from holotrace.exec.ray_executor import RayExecutor

    return RayExecutor()  # joins the session's cluster


def assert_same(a, b) -> None:
    assert a.ranks == b.ranks
    for key, v in a.frames.items():
        if is_table(v):
            assert_frames_equal(b.frames[key], v, check_exact=True, obj=key)
        else:
            assert str(b.frames[key]) == str(v), key
    assert [f.as_dict() for f in a.findings] == [f.as_dict() for f in b.findings]


@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_bundled_jobs_same_under_local_and_ray(ray_cluster, path):
    assert_same(summarize(path, executor=LocalExecutor(2)), summarize(path, executor=_ray_executor()))


def test_16_ranks_same_under_local_and_ray(ray_cluster, job16):
    ray_js = summarize(job16, executor=_ray_executor())
    assert ray_js.executor == "ray"
    assert_same(summarize(job16, executor=LocalExecutor(2)), ray_js)


def test_ingest_on_ray_then_summary_equals_direct_summary(ray_cluster, job16, tmp_path):
    ingest(job16, tmp_path, executor=_ray_executor(), ranks=range(0, 10))
    ingest(job16, tmp_path, executor=_ray_executor(), ranks=range(10, 16))
    assert_same(summarize(job16, executor=LocalExecutor(2)), read_ingest(tmp_path))


def test_corrupt_rank_on_ray_is_a_finding(ray_cluster, job16_corrupt):
    js = summarize(job16_corrupt, executor=_ray_executor())
    assert 9 not in js.ranks and len(js.ranks) == 15
    assert any(f.code is FindingCode.SKIPPED_FILE and f.rank == 9 for f in js.findings)
    assert_same(summarize(job16_corrupt, executor=LocalExecutor(2)), js)


def test_ray_executor_order_and_failures(ray_cluster):
    out = _ray_executor().map(int, ["0", "x", "2"])  # a function every worker can import
    assert (
        out[0] == 0
        and out[2] == 2
        and out[1] == TaskFailed("ValueError", "invalid literal for int() with base 10: 'x'")
    )
    done = []
    kept = _ray_executor().map(int, ["1", "5"], keep=lambda i, r: r * 10, on_done=lambda i, r: done.append((i, r)))
    assert kept == [10, 50] and sorted(done) == [
        (0, 1),
        (1, 5),
    ]  # on_done sees the result, the list holds what keep gave


def test_cli_summary_same_under_local_and_ray(ray_cluster, job16):
    """Through the command line (a Ray instance of its own), the JSON of summary is the local pool's."""

    def run(*extra):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "holotrace.cli",
                "summary",
                str(job16),
                "--format",
                "json",
                "--quiet",
                "--no-cache",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.replace('"executor": "ray"', '"executor": "local"')

    assert run("--executor", "ray", "--workers", "2") == run("--executor", "local")
