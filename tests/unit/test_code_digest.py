"""The digest of modules' source files that names data kept between runs."""

from __future__ import annotations

import importlib.util
import sys
import types

from holotrace import code_digest as cd


def _module(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m, path


def test_the_digest_follows_the_files_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(cd, "_DONE", {})
    a, path = _module(tmp_path, "maker_a", "X = 1\n")
    first = cd.code_digest(a)
    assert len(first) == 12 and int(first, 16) >= 0
    assert cd.code_digest(a) == first  # (kept for the process)
    monkeypatch.setattr(cd, "_DONE", {})
    assert cd.code_digest(a) == first  # (the same bytes: the same digest)
    path.write_text("X = 2\n", encoding="utf-8")
    monkeypatch.setattr(cd, "_DONE", {})
    assert cd.code_digest(a) != first
    b, _ = _module(tmp_path, "maker_b", "X = 2\n")
    monkeypatch.setattr(cd, "_DONE", {})
    assert cd.code_digest(a) != cd.code_digest(b)  # (the same bytes under another name)
    assert cd.code_digest(a, b) != cd.code_digest(b, a)


def test_a_module_without_a_file_counts_by_its_name(monkeypatch):
    monkeypatch.setattr(cd, "_DONE", {})
    built = types.ModuleType("made_here")
    assert cd.code_digest(built) == cd.code_digest(types.ModuleType("made_here"))
    assert cd.code_digest(built) != cd.code_digest(types.ModuleType("made_there"))
    assert cd.code_digest(sys) != cd.code_digest(built)
