"""``advise`` on Ray: a generated 1,024-rank job (small ranks, a planted straggler) gives the same
``advise --format json`` as the job loaded here. The ranks are decoded on the cluster and the job graph is
replayed in the driver (the replay at collective granularity inside the map is not built yet)."""

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
        assert main(["advise", *map(str, argv), "--format", "json", "--quiet", "--no-cache"]) == 0
    return json.loads(out.getvalue())


def test_1024_ranks_same_advice_on_ray(ray_cluster, tmp_path):
    job = planted_job(tmp_path / "job", ranks=1024, steps=1, layers=1, straggler=700)
    here = _advise(job)
    assert here["costliest_rank"]["rank"] == 700
    assert [f for f in here["fixes"] if f["fix"] == "straggler"][0]["rank"] == 700
    assert _advise(job, "--executor", "ray") == here
