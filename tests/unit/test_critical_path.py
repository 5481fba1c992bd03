"""Critical path on HTA's worked example (spec 25 §10.1): the known edges, their weights and attribution,
the path's ends, and the what-if ranking invariants."""

from __future__ import annotations

import numpy as np
import pytest

import holotrace
from corpus import shared_or_skip
from holotrace.analysis.critical_path import breakdown, critical_path, summary
from holotrace.analysis.critical_path.graph import EdgeType
from holotrace.analysis.critical_path.what_if import what_if
from holotrace.model.classify import HTA

ANNO = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"


@pytest.fixture(scope="module")
def simple_add():
    return holotrace.load(str(shared_or_skip() / "traces" / "hta_critical_path_simple_add"), cache=False)


def _edge(cp, a, a_start, b, b_start):
    g, idx = cp.graph, cp.view["index"]
    row = {int(i): r for r, i in enumerate(idx.tolist())}
    s = g.start_node[row[a]] if a_start else g.end_node[row[a]]
    d = g.start_node[row[b]] if b_start else g.end_node[row[b]]
    k = np.flatnonzero((g.src == s) & (g.dst == d))
    assert len(k) == 1
    k = int(k[0])
    return g.type[k], g.weight[k], (int(idx[g.attr[k]]) if g.attr[k] >= 0 else None)


def test_known_edges(simple_add):
    cp = critical_path(simple_add, rank=0, annotation=ANNO, instance=1, rules=HTA)
    assert cp.success and len(cp.graph.node_row) == 458 and len(cp.graph.src) == 415
    assert _edge(cp, 286, True, 287, True) == (EdgeType.OPERATOR_KERNEL, 15, 286)
    assert _edge(cp, 287, True, 1005, True) == (EdgeType.OPERATOR_KERNEL, 14, 287)
    assert _edge(cp, 1005, True, 1005, False) == (EdgeType.OPERATOR_KERNEL, 17, 1005)
    assert _edge(cp, 1005, False, 287, False) == (EdgeType.OPERATOR_KERNEL, 15, 287)
    assert _edge(cp, 287, False, 286, False) == (EdgeType.OPERATOR_KERNEL, 32, 286)
    assert _edge(cp, 1051, False, 1067, True) == (EdgeType.KERNEL_KERNEL_DELAY, 7, 1051)
    assert len(cp.path_nodes) == 315 and cp.length == 241724
    df = breakdown(cp)
    # rows in path order: each edge starts where the previous ended
    g = cp.graph
    assert (g.src[cp.path_edges[1:]] == g.dst[cp.path_edges[:-1]]).all()
    idx = cp.view["index"]
    assert df.event_idx.iloc[0] == 977 and idx[g.node_row[cp.path_nodes[0]]] == 977
    assert idx[g.node_row[cp.path_nodes[-1]]] == 1275 and not g.node_start[cp.path_nodes[-1]]
    s = summary(cp)
    assert s["cpu_bound"] == pytest.approx(99.779087, abs=1e-6)
    assert s["gpu_kernel_launch_overhead"] == pytest.approx(0.007033, abs=1e-6)


def test_instance_out_of_range_names_count(simple_add):
    with pytest.raises(ValueError, match="has 2 instance"):
        critical_path(simple_add, rank=0, annotation=ANNO, instance=5, rules=HTA)


def test_what_if_savings_bounded_and_ranked(simple_add):
    df = what_if(simple_add, rank=0)
    assert len(df)
    assert (df.saving >= 0).all() and (df.saving <= df.path_length + 1e-9).all()
    assert (np.diff(df.saving.to_numpy()) <= 1e-9).all()


def test_facade_overlay_counts(tmp_path):
    """Spec 25 §10.1: the default overlay keeps 167 complete events (159 critical) and draws 21 edges."""
    pytest.importorskip("networkx")
    import gzip
    import json

    ta = holotrace.TraceAnalysis(
        trace_dir=str(shared_or_skip() / "traces" / "hta_critical_path_simple_add"), cache=False
    )
    graph, ok = ta.critical_path_analysis(rank=0, annotation=ANNO, instance_id=1)
    assert ok
    path = ta.overlay_critical_path_analysis(0, graph, str(tmp_path / "o"))
    assert path.startswith(str(tmp_path / "o")) and "overlaid_critical_path_" in path
    doc = json.loads(gzip.decompress(open(path, "rb").read()))
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    complete = [e for e in ev if e.get("ph") == "X"]
    assert len(complete) == 167
    assert sum(1 for e in complete if (e.get("args") or {}).get("critical") == 1) == 159
    flows = [e for e in ev if e.get("cat") == "critical_path"]
    assert len(flows) == 42


def test_step_loop_reads_the_views_rules():
    """A view under HTA's rules, passed without ``rules``, is read under those rules (not holotrace's): the per-step
    path and the what-ifs equal those asked for with ``rules=HTA`` and differ from holotrace's (µs vs ns)."""
    from holotrace.analysis.critical_path import per_step
    from holotrace.model.view import resolve

    job = holotrace.load(str(shared_or_skip() / "traces" / "hta_amd_mi250"), cache=False)  # 2 steps: HTA keeps 1
    view = resolve(job, HTA)
    own = per_step(view, rank=0)
    assert len(own) and own.equals(per_step(job, rank=0, rules=HTA))
    assert not own.equals(per_step(job, rank=0))
    wi = what_if(view, rank=0)
    assert len(wi) and wi.equals(what_if(job, rank=0, rules=HTA)) and not wi.equals(what_if(job, rank=0))
