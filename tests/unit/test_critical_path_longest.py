"""The vectorised longest path against networkx's walk (ties included) on random graphs, and hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest

from holotrace.analysis.critical_path.longest import dag_longest_path, dag_longest_path_loop


def _random_graph(rng, dag: bool):
    n = int(rng.integers(2, 40))
    m = int(rng.integers(1, 90))
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = a != b
    a, b = a[keep], b[keep]
    if dag:  # edges forward in a random order of the nodes
        perm = rng.permutation(n)
        a, b = perm[np.minimum(a, b)], perm[np.maximum(a, b)]
    _, first = np.unique(a * 1000 + b, return_index=True)
    first = np.sort(first)
    return a[first].astype(np.int64), b[first].astype(np.int64), rng.integers(0, 4, len(first)).astype(np.float64)


def test_same_path_as_the_walk_on_random_dags():
    rng = np.random.default_rng(7)
    for _ in range(1500):
        src, dst, w = _random_graph(rng, dag=True)
        if len(src):
            assert np.array_equal(dag_longest_path(src, dst, w), dag_longest_path_loop(src, dst, w))


def test_same_as_networkx_with_cycles():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(11)
    for _ in range(600):
        src, dst, w = _random_graph(rng, dag=False)
        if not len(src):
            continue
        g = nx.DiGraph()
        for s, d, x in zip(src.tolist(), dst.tolist(), w.tolist()):
            g.add_edge(s, d, weight=x)
        got = dag_longest_path(src, dst, w)
        if nx.is_directed_acyclic_graph(g):
            assert got.tolist() == nx.dag_longest_path(g, weight="weight")
        else:
            assert got is None


def test_ties():
    # two equal paths 0-1-3 and 0-2-3: the first predecessor of 3 in insertion order wins
    src, dst = np.array([0, 0, 2, 1]), np.array([1, 2, 3, 3])
    assert dag_longest_path(src, dst, np.array([1.0, 1.0, 1.0, 1.0])).tolist() == [0, 2, 3]
    # a zero-weight edge after the maximum: the path ends at the earlier node
    assert dag_longest_path(np.array([0, 1]), np.array([1, 2]), np.array([5.0, 0.0])).tolist() == [0, 1]
    # two disconnected maxima at the same generation: networkx's node order decides
    src, dst = np.array([4, 0]), np.array([5, 1])
    assert dag_longest_path(src, dst, np.array([3.0, 3.0])).tolist() == [4, 5]


def test_fractional_weights_take_the_exact_walk():
    src, dst = np.array([0, 1, 0]), np.array([1, 2, 2])
    w = np.array([0.1, 0.2, 0.3])
    # 0.1 + 0.2 > 0.3 in floating point, as in networkx
    assert dag_longest_path(src, dst, w).tolist() == [0, 1, 2]


def test_long_chain_with_cross_edges():
    # a CPU chain 0..999 launching a GPU chain 1000..1999 every 10 nodes; kernel chain wins at the end
    cpu = np.arange(999)
    gpu = 1000 + np.arange(999)
    src = np.concatenate([cpu, gpu, np.arange(0, 1000, 10)])
    dst = np.concatenate([cpu + 1, gpu + 1, 1000 + np.arange(0, 1000, 10)])
    w = np.concatenate([np.ones(999), np.full(999, 2.0), np.zeros(100)])
    path = dag_longest_path(src, dst, w)
    assert np.array_equal(path, dag_longest_path_loop(src, dst, w))
    assert path.tolist() == [0] + list(range(1000, 2000))
