"""The package's layers depend one way, and no module imports itself back through others.

files → ingest → model → analysis → render / commands / compat (docs/architecture.md). Every import is
counted, including those inside functions: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "holotrace"

# what each layer may import (besides itself)
ALLOWED = {
    "base": set(),
    "exec": {"base"},
    "ingest": {"base", "exec"},
    "model": {"base", "exec"},
    "loader": {"base", "exec", "ingest", "model"},
    "analysis": {"base", "exec", "model"},
    "render": {"base", "model", "analysis"},
    "compat": {"base", "exec", "model", "analysis", "render", "loader"},
    "scale": {"base", "exec", "ingest", "model", "loader", "analysis"},
    "commands": {"base", "exec", "ingest", "model", "analysis", "render", "loader", "scale"},
    "cli": {"base", "commands", "package"},
    "package": {"base", "loader", "model", "compat"},
}
BASE_MODULES = {"errors", "schema", "findings", "text", "atomic", "table", "order_stats", "code_digest"}


def _layer(module: str) -> str:
    parts = module.split(".")[1:]  # drop "holotrace"
    if not parts:
        return "package"  # the package root: load(), the model's types, TraceAnalysis
    head = parts[0]
    if head in BASE_MODULES:
        return "base"
    return head


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        rel = p.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("holotrace"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            if not name.startswith("holotrace"):
                continue
            subs = [f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in MODULES]
            found.update(subs)  # "from holotrace.analysis import idle" imports a module
            if len(subs) < len(node.names):
                found.add(name)
    return found


MODULES = _modules()
GRAPH = {m: {i for i in _imports(p, m) if i in MODULES and i != m} for m, p in MODULES.items()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_from_a_layer_above(module):
    layer = _layer(module)
    assert layer in ALLOWED, f"{module}: layer {layer!r} is not described in docs/architecture.md and this test"
    bad = sorted(i for i in GRAPH[module] if _layer(i) != layer and _layer(i) not in ALLOWED[layer])
    assert not bad, f"{module} ({layer}) imports {bad}"


def test_no_import_circles():
    # strongly connected components (Tarjan) of the module graph; package __init__ re-exports excluded
    graph = {m: {i for i in deps if MODULES[i].name != "__init__.py"} for m, deps in GRAPH.items()}
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert comps == []


def test_modules_stay_small():
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert big == {}, f"modules over ~500 lines: {big}"


def test_commands_do_not_import_other_commands():
    # a subcommand's module imports the shared command helpers (base, _load, _output, ...) and lower layers only
    def is_command(m: str) -> bool:
        parts = m.split(".")
        return len(parts) == 3 and parts[1] == "commands" and not parts[2].startswith("_") and parts[2] != "base"

    bad = {m: sorted(i for i in GRAPH[m] if is_command(i)) for m in MODULES if is_command(m)}
    assert {m: i for m, i in bad.items() if i} == {}
