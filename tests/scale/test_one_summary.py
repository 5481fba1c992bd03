"""One summary: ``holotrace summary --format json`` is byte for byte the same (the path aside) whether the ranks'
summaries come from the job loaded in one process, the local pool, Ray or an ingested folder."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from corpus import BUNDLED, SHARED
from holotrace.cli import main
from holotrace.ingest.discover import discover


def _multi_rank(folder: Path) -> bool:
    try:
        return len(discover(folder).files) > 1
    except Exception:  # not a job holotrace reads: not a multi-rank job either
        return False


def _corpus_jobs() -> list[Path]:
    jobs = {p.name: p for p in BUNDLED}
    if (SHARED / "traces").is_dir():
        jobs.update({p.name: p for p in sorted((SHARED / "traces").iterdir()) if p.is_dir()})
    return [p for _, p in sorted(jobs.items()) if _multi_rank(p)]


CORPUS = _corpus_jobs()


def summary_json(*argv) -> str:
    """The JSON ``holotrace summary`` prints, its ``meta.path`` blanked.

    The costliest rank ("one story") replays the job's graph, which needs every rank's events in one process: a
    summary mapped over the ranks (or read from an ingest folder) loads them in the driver for it, so it too is
    the same on every path."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["summary", *map(str, argv), "--format", "json", "--quiet", "--no-cache"]) == 0
    doc = json.loads(out.getvalue())
    assert set(doc["meta"]) == {"path", "ranks", "steps", "world_size"}
    doc["meta"]["path"] = ""
    assert doc["costliest_rank"]["rank"] is not None
    return json.dumps(doc, indent=1)


def ingested(job: Path, folder: Path) -> Path:
    assert main(["ingest", str(job), "--output", str(folder), "--quiet", "--workers", "2"]) == 0
    return folder


@pytest.fixture(scope="module")
def job8(tmp_path_factory) -> Path:
    """A generated 8-rank job (about 0.3 MB a rank, rank 3 a straggler)."""
    import subprocess
    import sys

    from corpus import REPO

    out = tmp_path_factory.mktemp("job8")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "generate.py"),
            "--out",
            str(out),
            "--ranks",
            "8",
            "--target-mb",
            "0.3",
            "--steps",
            "3",
            "--straggler-rank",
            "3",
            "--jobs",
            "2",
        ],
        check=True,
        capture_output=True,
    )
    return out


def test_the_corpus_has_a_multi_rank_job():
    assert CORPUS, "no multi-rank job among the bundled traces"


@pytest.mark.parametrize("job", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_job_same_in_memory_on_the_pool_and_ingested(job, tmp_path):
    here = summary_json(job)
    assert summary_json(job, "--executor", "local", "--workers", "2") == here
    assert summary_json(ingested(job, tmp_path / "ingest")) == here


def test_generated_job_same_in_memory_on_the_pool_and_ingested(job8, tmp_path):
    here = summary_json(job8)
    doc = json.loads(here)
    assert doc["meta"]["ranks"] == list(range(8)) and doc["meta"]["steps"]
    assert {r["rank"] for r in doc["temporal"]} == set(range(8))
    assert summary_json(job8, "--executor", "local", "--workers", "2") == here
    assert summary_json(ingested(job8, tmp_path / "ingest")) == here


@pytest.mark.ray
def test_same_on_ray(ray_cluster, job8):
    for job in [*CORPUS, job8]:
        assert summary_json(job, "--executor", "ray", "--workers", "2") == summary_json(job), job.name


def test_lines_name_the_planted_straggler(job8):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["summary", str(job8), "--quiet", "--no-cache", "--width", "200"]) == 0
    text = out.getvalue()
    assert "straggler: rank 3 " in text and "launch delay: median " in text
