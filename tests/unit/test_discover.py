"""Finding a job's files and their ranks; every doubt is a finding, strict mode raises."""

from __future__ import annotations

import json

import pytest

import holotrace
from holotrace import errors
from tracebuilder import TraceBuilder


def _rank_file(folder, rank, world=4, name=None, compact=False, distributed=True, gz=False, backend="nccl"):
    tb = TraceBuilder(rank=rank, world_size=world, distributed=distributed, backend=backend)
    tb.annotation("ProfilerStep#1", 0, 100)
    tb.launch_kernel("gemm", 10, 5, 20, 30)
    return tb.write(folder, name=name, compact=compact, gz=gz)


def codes(job):
    return {f.code: f for f in job.findings}


def test_rank_from_distributed_info_compact_json(tmp_path):
    # HTA's text regex misses compact JSON ("rank":3) and calls it rank 0
    _rank_file(tmp_path, 3, world=4, name="a.json", compact=True)
    job = holotrace.load(tmp_path / "a.json", cache=False)
    assert job.ranks == [3]


def test_rank_by_content_not_name(tmp_path):
    for r in range(4):
        _rank_file(tmp_path, r, name=f"trace_{3 - r}.json.gz" if r % 2 else f"x{r}.json", gz=bool(r % 2))
    (tmp_path / "notes.txt").write_text("not a trace")
    (tmp_path / "et.json").write_text(json.dumps({"schema": "1.0", "nodes": []}))
    job = holotrace.load(tmp_path, cache=False)
    assert job.ranks == [0, 1, 2, 3]
    assert "missing_ranks" not in codes(job)
    skipped = {p.split("/")[-1] for p, _ in job.skipped}
    assert skipped == {"notes.txt", "et.json"}


def test_rank_from_file_name_then_assigned(tmp_path):
    _rank_file(tmp_path, None, name="worker7.pt.trace.json", distributed=False)
    _rank_file(tmp_path, None, name="rank_2.json", distributed=False)
    _rank_file(tmp_path, None, name="zzz.json", distributed=False)
    job = holotrace.load(tmp_path, cache=False)
    assert job.ranks == [0, 2, 7]
    assert job.files[0].endswith("zzz.json")
    f = codes(job)["rank_assigned"]
    assert "zzz.json -> 0" in f.message


def test_duplicate_rank_is_reported_never_collapsed(tmp_path):
    _rank_file(tmp_path, 0, world=2, name="a.json")
    _rank_file(tmp_path, 0, world=2, name="b.json")
    _rank_file(tmp_path, 1, world=2, name="c.json")
    job = holotrace.load(tmp_path, cache=False)
    assert job.ranks == [0, 1]
    f = codes(job)["duplicate_rank"]
    assert f.severity == "error" and f.rank == 0 and "a.json" in f.message and "b.json" in f.message
    with pytest.raises(errors.JobConsistencyError, match="rank 0 appears in 2 files"):
        holotrace.load(tmp_path, cache=False, strict=True)


def test_missing_rank_one_of_eight(tmp_path):
    for r in range(8):
        if r != 5:
            _rank_file(tmp_path, r, world=8)
    job = holotrace.load(tmp_path, cache=False)
    f = codes(job)["missing_ranks"]
    assert f.severity == "error" and "5" in f.message and "0-4, 6-7" in f.message
    assert job.cross_rank_warning and "5" in job.cross_rank_warning
    with pytest.raises(errors.JobConsistencyError, match="have no trace: 5"):
        holotrace.load(tmp_path, cache=False, strict=True)


def test_mixed_jobs(tmp_path):
    _rank_file(tmp_path, 0, world=2, name="a.json")
    _rank_file(tmp_path, 1, world=4, name="b.json")
    job = holotrace.load(tmp_path, cache=False)
    f = codes(job)["mixed_jobs"]
    assert "world_size 2 (a.json) vs 4 (b.json)" in f.message
    _rank_file(tmp_path, 1, world=2, name="b.json", backend="gloo")
    job = holotrace.load(tmp_path, cache=False)
    assert "backend" in codes(job)["mixed_jobs"].message


def test_list_of_files_and_single_rank_of_big_job(tmp_path):
    a = _rank_file(tmp_path, 0, world=300, name="a.json")
    b = _rank_file(tmp_path, 1, world=300, name="b.json")
    job = holotrace.load([a, b], cache=False)
    assert job.ranks == [0, 1]
    one = holotrace.load(a, cache=False)
    f = codes(one)["missing_ranks"]
    assert f.severity == "info"  # one file given on purpose: a single-rank analysis


def test_legacy_bare_array_format(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("k", 1, 2, 3, 4)
    doc = tb.document()["traceEvents"]
    f = tmp_path / "legacy.json"
    f.write_text(json.dumps(doc, indent=1))
    job = holotrace.load(f, cache=False)
    assert job.rank(0).format == "array"
    assert job.rank(0).n_events == 2
    assert "rank_assigned" in codes(job)
