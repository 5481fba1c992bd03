"""Pages of columns mapped from the cache given back once a command has made what it goes on with.

``release_mapped`` gives back each file mapping under some arrays once and leaves heap arrays alone; the job
graph and the job's summary give back the pages of the columns they read (their values unchanged: they are
paged in again from the file when read)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import holotrace
from corpus import DATA
from holotrace.analysis.critical_path.job_graph import build_job_graph
from holotrace.ingest import cache as cache_mod
from holotrace.model.classify import NATIVE
from holotrace.model.job import release_mapped
from holotrace.model.view import job_view

EXAMPLE = DATA / "traces" / "hta_trace_filter_2rank"


class _Mapping:
    """Stands for a mapping made by the store: counts the times its pages are given back."""

    def __init__(self):
        self.released = 0

    def release_pages(self):
        self.released += 1


class _Column:
    def __init__(self, base):
        self.base = base


def test_each_mapping_is_released_once_and_heap_arrays_are_left_alone():
    a, b = _Mapping(), _Mapping()
    heap = np.arange(10)
    release_mapped([_Column(a), _Column(a), heap, heap[2:], _Column(b), _Column(None)])
    assert (a.released, b.released) == (1, 1)
    np.testing.assert_array_equal(heap, np.arange(10))


def _mapped_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (Linux ``/proc/self/smaps``)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
            inside = len(head) >= 6 and head[5] == str(path)
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total


def _cached(tmp_path):
    cache = tmp_path / "cache"
    holotrace.load(str(EXAMPLE), cache_dir=str(cache))  # fills the cache
    cache_mod.flush()  # (its entries are written on threads)
    job = holotrace.load(str(EXAMPLE), cache_dir=str(cache))  # columns mapped from it
    files = sorted(cache.glob("*/columns.bin"))
    assert len(files) == len(job.ranks) == 2
    return job, files


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident pages read from /proc/self/smaps")
def test_the_views_pages_are_given_back_and_read_again(tmp_path):
    job, files = _cached(tmp_path)
    view = job_view(job, NATIVE)
    before = {r: int(view[r]["ts"].sum()) for r in view.ranks}  # pages the mapped columns in
    assert all(_mapped_kb(f) > 0 for f in files)
    view.release_pages()
    assert [_mapped_kb(f) for f in files] == [0, 0]
    assert {r: int(view[r]["ts"].sum()) for r in view.ranks} == before  # read again from the file


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident pages read from /proc/self/smaps")
def test_the_job_graph_gives_back_the_pages_it_read(tmp_path):
    job, files = _cached(tmp_path)
    g = build_job_graph(job)
    assert [_mapped_kb(f) for f in files] == [0, 0]
    fresh = build_job_graph(holotrace.load(str(EXAMPLE), cache=False))  # (columns in the heap: nothing to give back)
    np.testing.assert_array_equal(g.point_time, fresh.point_time)
    np.testing.assert_array_equal(g.chain_order, fresh.chain_order)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident pages read from /proc/self/smaps")
def test_the_job_summary_gives_back_the_pages_it_read(tmp_path):
    from holotrace.analysis.job_summary import summarize_job

    job, files = _cached(tmp_path)
    s = summarize_job(job)
    assert [_mapped_kb(f) for f in files] == [0, 0]
    fresh = summarize_job(holotrace.load(str(EXAMPLE), cache=False))
    for name in ("temporal", "kernel_types", "top_kernels"):
        a, b = s.frames.get(name), fresh.frames.get(name)
        assert a is not None and b is not None and list(a.columns) == list(b.columns)
        for c in a.columns:
            np.testing.assert_array_equal(a[c], b[c])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident pages read from /proc/self/smaps")
def test_a_rank_gives_back_its_own_pages(tmp_path):
    """A rank view gives back its own rank's pages alone."""
    job, files = _cached(tmp_path)
    view = job_view(job, NATIVE)
    sums = {r: int(view[r]["ts"].sum()) + int(view[r]["end"].sum()) for r in view.ranks}
    assert all(_mapped_kb(f) > 0 for f in files)
    first, second = view.ranks
    view[first].release_pages()
    left = {str(f): _mapped_kb(f) for f in files}
    assert sorted(left.values())[0] == 0 and sorted(left.values())[1] > 0  # one rank's file given back, not both
    assert {r: int(view[r]["ts"].sum()) + int(view[r]["end"].sum()) for r in view.ranks} == sums


def test_trim_heap_runs_where_there_is_a_c_library_and_is_harmless():
    from holotrace.model.job import trim_heap

    kept = np.arange(1_000_000)
    trim_heap()
    trim_heap()  # (found once, called again)
    np.testing.assert_array_equal(kept, np.arange(1_000_000))
