"""``advise`` on Ray: a generated 1,024-rank job (small ranks, a planted straggler) gives the same
``advise --format json`` as on the local pool. Above 64 ranks both replay the job at collective granularity: each
rank's map (on the cluster, or in the local pool) returns its step as segments between collectives and the driver
replays the job from them, holding no event (docs/analyses.md, the scale-out replay)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from holotrace.cli import main
from plantedjob import planted_job

pytestmark = pytest.mark.ray


def _advise(*argv) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["advise", *map(str, argv), "--format", "json", "--quiet"]) == 0
    return json.loads(out.getvalue())


def test_1024_ranks_same_advice_on_ray(ray_cluster, tmp_path):
    job = planted_job(tmp_path / "job", ranks=1024, steps=1, layers=4, straggler=700)
    here = _advise(job, "--cache-dir", tmp_path / "cache-local")
    assert here["costliest_rank"]["rank"] == 700
    assert (here["fixes"][0]["fix"], here["fixes"][0]["rank"]) == ("straggler", 700)
    assert _advise(job, "--executor", "ray", "--cache-dir", tmp_path / "cache-ray") == here
