"""A rank view's lazy columns: made once on first read, columns made together kept together, forgetting."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from holotrace.model.lazy_columns import Columns


def _together(calls: list):
    def make() -> dict:
        calls.append(1)
        return {"a": np.arange(3), "b": np.arange(3) * 2}

    return dict.fromkeys(("a", "b"), make)


def test_columns_made_together_are_made_once_and_kept():
    calls = []
    c = Columns({"x": np.zeros(3)}, {"y": lambda: np.ones(3)}, ("x", "y", "a", "b"), _together(calls))
    assert list(c) == ["x", "y", "a", "b"] and "a" in c and "b" in c
    assert not c.is_made("a") and not c.is_made("b")
    assert c["b"].tolist() == [0, 2, 4]
    assert c.is_made("a") and c["a"].tolist() == [0, 1, 2]
    assert len(calls) == 1
    with pytest.raises(KeyError):
        c["nope"]


def test_threads_asking_at_once_share_one_making():
    calls, started = [], threading.Event()

    def slow() -> dict:
        started.set()
        calls.append(1)
        threading.Event().wait(0.05)  # (the other thread asks meanwhile)
        return {"a": np.arange(2), "b": np.arange(2)}

    c = Columns({}, {}, (), dict.fromkeys(("a", "b"), slow))
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("t", c["a"]))
    t.start()
    started.wait()
    got["main"] = c["b"]
    t.join()
    assert len(calls) == 1 and got["t"] is c["a"] and got["main"] is c["b"]


def test_forgotten_columns_are_made_again_alone():
    calls, remade = [], []

    def remake(key):
        remade.append(key)
        return np.full(3, 7)

    c = Columns({}, {}, (), _together(calls))
    _ = c["a"]
    c.forget(keep=("b",), remake=remake)
    assert not c.is_made("a") and c.is_made("b")
    assert c["a"].tolist() == [7, 7, 7] and remade == ["a"] and len(calls) == 1
    d = Columns({}, {}, (), _together([]))  # nothing made yet: each column alone when read, kept or not
    d.forget(keep=("a",), remake=remake)
    assert d["b"].tolist() == [7, 7, 7] and not d.is_made("a")
    assert d["a"].tolist() == [7, 7, 7] and remade == ["a", "b", "a"]
