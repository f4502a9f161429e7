"""Packages form a DAG: no two privfl packages import each other, counting imports inside functions.

Walks the AST of every module under ``src/privfl`` (top-level imports and those inside functions
or ``TYPE_CHECKING`` blocks alike), resolves each import to a privfl module, and builds two
graphs: modules, and packages (a module belongs to the innermost package folder that holds it,
so ``privfl.fl`` and ``privfl.algorithms`` are two nodes; the top-level modules such as
``privfl._validation`` form the node ``privfl``). Either graph with a cycle fails the test,
which prints the cycle and the import lines that make it.

``KNOWN_CYCLE_EDGES`` lists the edges that still close a cycle, each with the work that removes
it; an entry that no longer exists fails the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import collections
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: (importer, imported) edges allowed to close a cycle for now, with who removes them.
KNOWN_CYCLE_EDGES: dict[str, dict[tuple[str, str], str]] = {
    "module": {},
    "package": {},
}


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted((SRC / "privfl").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()
PACKAGES = {name for name, (_, is_package) in MODULES.items() if is_package}


def _resolve(name: str) -> str | None:
    """The privfl module an import of ``name`` loads (``a.b.attr`` -> ``a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _package(module: str) -> str:
    if module in PACKAGES:
        return module
    return module.rpartition(".")[0]


@functools.cache  # one parse of src/ for the whole file (each test reads, none mutates)
def _imports() -> dict[tuple[str, str], list[str]]:
    """module edges -> ``file:line`` of the imports that make them."""
    edges: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for module, (path, is_package) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [f"{stem}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                resolved = _resolve(target) if target.startswith("privfl") else None
                if resolved and resolved != module:
                    where = f"{path.relative_to(SRC.parent)}:{node.lineno}"
                    edges[(module, resolved)].append(where)
    return dict(edges)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan 1972), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    nodes = sorted(set(graph) | {b for targets in graph.values() for b in targets})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _graph(kind: str) -> dict[tuple[str, str], list[str]]:
    edges = _imports()
    if kind == "module":
        return edges
    packages: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for (a, b), where in edges.items():
        pa, pb = _package(a), _package(b)
        if pa != pb:
            packages[(pa, pb)].extend(f"{w} ({a} -> {b})" for w in where)
    return packages


def _describe(component: list[str], edges: dict[tuple[str, str], list[str]]) -> str:
    lines = [" <-> ".join(component)]
    for (a, b), where in sorted(edges.items()):
        if a in component and b in component:
            lines.append(f"  {a} -> {b}:")
            lines.extend(f"      {w}" for w in where[:6])
            if len(where) > 6:
                lines.append(f"      ... and {len(where) - 6} more")
    return "\n".join(lines)


@pytest.mark.parametrize("kind", ["package", "module"])
def test_no_import_cycles(kind):
    edges = _graph(kind)
    allowed = KNOWN_CYCLE_EDGES[kind]
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for a, b in edges:
        if (a, b) not in allowed:
            graph[a].add(b)
    cycles = _cycles(graph)
    assert not cycles, f"{kind} import cycles:\n" + "\n".join(
        _describe(component, edges) for component in cycles
    )


@pytest.mark.parametrize("kind", ["package", "module"])
def test_known_cycle_edges_still_exist(kind):
    """An allow-listed edge that is gone must leave the list (it only shrinks)."""
    edges = _graph(kind)
    stale = [edge for edge in KNOWN_CYCLE_EDGES[kind] if edge not in edges]
    assert not stale, f"remove these from KNOWN_CYCLE_EDGES[{kind!r}]: {stale}"


def test_the_walk_sees_imports_inside_functions():
    edges = _imports()
    # privfl.config.schema imports the attack section at the top and nothing of the algorithms
    assert ("privfl.algorithms.base", "privfl.config.schema") in edges
    # a function-level import is an edge too (privfl.cli.main imports its commands lazily)
    lazy = [
        (a, b) for (a, b), where in edges.items()
        if a == "privfl.cli.main" and b.startswith("privfl.")
    ]
    assert lazy
    cycle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(cycle) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


ARCHITECTURE = SRC.parent / "docs" / "architecture.md"


def _documented_layers() -> dict[str, int]:
    """``package -> layer`` from the table of docs/architecture.md."""
    import re

    rows = re.findall(r"^\| (\d+) \| `([a-z_.]+)` \|", ARCHITECTURE.read_text(encoding="utf-8"),
                      re.MULTILINE)
    return {package: int(layer) for layer, package in rows}


def _top_package(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and module not in PACKAGES):
        return "privfl"
    return parts[1]


def test_the_package_map_lists_every_package():
    tops = {_top_package(module) for module in MODULES}
    assert set(_documented_layers()) == tops


def test_every_import_goes_down_the_documented_layers():
    """docs/architecture.md's layers are true: a package imports only lower layers."""
    layers = _documented_layers()
    upward = collections.defaultdict(list)
    for (a, b), where in _imports().items():
        pa, pb = _top_package(a), _top_package(b)
        if pa != pb and layers[pb] >= layers[pa]:
            upward[(pa, pb)].append(f"{where[0]} ({a} -> {b})")
    assert not upward, "imports that do not go down docs/architecture.md's layers:\n" + "\n".join(
        f"  {pa} (layer {layers[pa]}) -> {pb} (layer {layers[pb]}): {w[0]}"
        for (pa, pb), w in sorted(upward.items()))
