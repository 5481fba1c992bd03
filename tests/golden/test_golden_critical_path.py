"""Critical path against HTA 0.6.1's ``critical_path_breakdown.csv`` / ``critical_path_summary.csv`` for every job
with reference outputs, with the parameters HTA used (``meta.json``). Graph sizes (nodes with edges, edges,
path edges) must be equal, breakdown rows equal as multisets (HTA writes them in set order; holotrace in path
order), durations and summary percentages within 1e-6 relative."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from corpus import golden_jobs
from holotrace import TraceAnalysis

RTOL = 1e-6
JOBS = [(j, t, g) for j, t, g in golden_jobs() if (g / "critical_path_breakdown.csv").exists()]


def _norm(df: pd.DataFrame) -> pd.DataFrame:
    d = df[["event_idx", "duration", "type", "s_name", "bound_by"]].copy()
    for c in ("s_name", "bound_by"):
        d[c] = d[c].fillna("").astype(str)
    d["event_idx"] = d["event_idx"].astype(float).fillna(-9.0)
    return d.sort_values(["event_idx", "type", "duration", "s_name"]).reset_index(drop=True)


@pytest.mark.parametrize("job,traces,golden", JOBS, ids=[j for j, _, _ in JOBS])
def test_critical_path_matches_hta(job, traces, golden):
    p = json.loads((golden / "meta.json").read_text())["params"]["critical_path"]
    ta = TraceAnalysis(trace_dir=str(traces), cache=False, hta_compat=True)
    inst = tuple(p["instance_id"]) if isinstance(p["instance_id"], list) else p["instance_id"]
    graph, ok = ta.critical_path_analysis(p["rank"], p["annotation"], inst)
    assert ok is p["success"]
    assert graph.number_of_edges() == p["edges"]
    assert graph.number_of_nodes() == p["nodes"]
    ours = graph.get_critical_path_breakdown()
    assert len(ours) == p["critical_path_edges"]
    # path order: consecutive edges share a node
    path = graph.critical_path_nodes
    assert len(path) == len(ours) + 1
    a, b = (
        _norm(ours),
        _norm(pd.read_csv(golden / "critical_path_breakdown.csv", keep_default_na=False, na_values=[""])),
    )
    assert (a.event_idx.values == b.event_idx.values).all()
    assert (a.type.values == b.type.values).all()
    assert (a.s_name.values == b.s_name.values).all()
    assert (a.bound_by.values == b.bound_by.values).all()
    np.testing.assert_allclose(a.duration.values, b.duration.values, rtol=RTOL)
    gs = pd.read_csv(golden / "critical_path_summary.csv", keep_default_na=False)
    s = graph.summary()
    assert sorted(s.index) == sorted(gs.bound_by)
    for k, v in zip(gs.bound_by, gs.pct_of_critical_path):
        assert s[k] == pytest.approx(v, rel=RTOL, abs=1e-9)
