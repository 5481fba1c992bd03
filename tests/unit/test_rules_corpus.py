"""On every corpus job: holotrace's classification is at least HTA's (nothing HTA calls communication becomes
something else), and the rules command runs."""

from __future__ import annotations

import numpy as np
import pytest

import holotrace
from corpus import SHARED
from holotrace.analysis import classification
from holotrace.errors import HolotraceError
from holotrace.model.classify import HTA, NATIVE, KernelType
from holotrace.model.view import job_view

JOBS = sorted(p for p in (SHARED / "traces").iterdir() if p.is_dir()) if (SHARED / "traces").is_dir() else []
COMM = int(KernelType.COMMUNICATION)


@pytest.mark.skipif(not JOBS, reason="full trace corpus (../shared/traces beside the repository) not present")
@pytest.mark.parametrize("folder", JOBS, ids=[p.name for p in JOBS])
def test_default_classification_is_at_least_htas(folder):
    try:
        job = holotrace.load(folder)
    except HolotraceError as e:  # a corpus job HTA cannot load either (its golden says so)
        pytest.skip(f"does not load: {e}")
    native, hta = job_view(job, NATIVE), job_view(job, HTA)
    for r in job.ranks:
        h, n = hta[r], native[r]
        hta_comm = np.unique(h["index"][h["gpu"] & (h["kernel_type"] == COMM)])
        on_gpu = n["gpu"]
        pos = np.searchsorted(np.sort(n["index"][on_gpu]), hta_comm)
        order = np.argsort(n["index"][on_gpu], kind="stable")
        idx_sorted = n["index"][on_gpu][order]
        present = (pos < len(idx_sorted)) & (idx_sorted[np.minimum(pos, len(idx_sorted) - 1)] == hta_comm)
        types = n["kernel_type"][on_gpu][order][pos[present]]
        assert (types == COMM).all(), (folder.name, r)
        # communication rows always carry a kind (UNKNOWN at least), other rows none
        assert ((n["comm_kind"] >= 0) == ((n["kernel_type"] == COMM) | (~n["gpu"] & (n["rule"] >= 0)))).all()
    k = classification.kernel_rules(job)
    assert k["share"].sum() == pytest.approx(100.0 if len(k) else 0.0)
