"""The import graph of `sandbox/`, `reward_server/` and `trainer/`, read from the source (ast,
nothing imported): no circle inside a package, no import that runs back up, and the runner on
the standard library alone.

Which imports count: every `import` and `from ... import` statement anywhere in a file, at
module level, inside a function, under `if TYPE_CHECKING:` or in a `try`. A lazy import inside a
function still ties the two modules together (the first call runs it, and a reader has to know
both to follow either), so it counts the same as one at the top; hiding a circle behind a lazy
import is what this test exists to refuse. Strings handed to importlib are not imports and are
not seen.

How an import names a module: `import a.b.c` and `from a.b import c` name `a.b.c` when that is
a module of the tree (a file or a package), else the nearest package above it that is; relative
imports are resolved against the importing file's package. Importing `a.b.c` runs
`a/__init__.py` and `a/b/__init__.py` too, but those are not counted as edges: a package's
`__init__` is its face, and the edge that matters is to the module named.

"Runs back up": a module importing the package it belongs to (its own `__init__` or an
ancestor's), or two sibling packages or modules that import each other (checked at every level:
within each package, the graph of its direct children, each child standing for everything under
it, has no circle). Across the top-level packages the direction is trainer -> reward_server ->
sandbox: sandbox imports neither of the others, reward_server never imports trainer.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sandbox", "reward_server", "trainer")
RUNNER = "sandbox.runner"
# what each top-level package may import of the others (trainer -> reward_server -> sandbox)
MAY_IMPORT = {"trainer": {"reward_server", "sandbox"}, "reward_server": {"sandbox"}, "sandbox": set()}


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every .py file of the three packages (a package is its __init__)."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if "__pycache__" in parts or not all(p.isidentifier() for p in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _known(dotted: str) -> str | None:
    """The module of the tree `dotted` names: itself, else the nearest package above it."""
    parts = dotted.split(".")
    while parts:
        name = ".".join(parts)
        if name in MODULES:
            return name
        parts.pop()
    return None


def _imports(name: str) -> tuple[set[str], set[str]]:
    """(modules of the tree, top-level names outside it) that module `name` imports."""
    tree = ast.parse(MODULES[name].read_text(), str(MODULES[name]))
    package = name if _is_package(name) else name.rpartition(".")[0]
    inside: set[str] = set()
    outside: set[str] = set()

    def add(dotted: str) -> None:
        found = _known(dotted)
        if found is not None:
            inside.add(found)
        else:
            outside.add(dotted.split(".")[0])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            for alias in node.names:
                sub = f"{stem}.{alias.name}"
                add(sub if sub in MODULES else stem)
    inside.discard(name)
    return inside, outside


GRAPH: dict[str, set[str]] = {}
EXTERNAL: dict[str, set[str]] = {}
for _name in MODULES:
    GRAPH[_name], EXTERNAL[_name] = _imports(_name)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def _ties(component: list[str], graph: dict[str, set[str]]) -> str:
    members = set(component)
    return "; ".join(f"{a} -> {b}" for a in component for b in sorted(graph[a] & members))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_circle_within_a_package(package: str) -> None:
    graph = {m: {d for d in deps if d.split(".")[0] == package}
             for m, deps in GRAPH.items() if m.split(".")[0] == package}
    found = _circles(graph)
    assert not found, "import circles:\n" + "\n".join(f"{c}: {_ties(c, graph)}" for c in found)


def _children(package: str) -> list[str]:
    prefix = package + "."
    return sorted({m[len(prefix):].split(".")[0] for m in MODULES if m.startswith(prefix)})


@pytest.mark.parametrize("package", sorted(m for m in MODULES if _is_package(m)))
def test_no_import_runs_back_up(package: str) -> None:
    """Inside `package`: no module imports it (its face) or a package above it, and its direct
    children (each standing for all below it) import each other in no circle."""
    prefix = package + "."
    up = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() if m.startswith(prefix)
                for d in deps if _is_package(d) and (d == package or prefix.startswith(d + ".")))
    assert not up, "imports of a package from inside it:\n" + "\n".join(up)
    child = {c: set() for c in _children(package)}
    for m, deps in GRAPH.items():
        if not m.startswith(prefix):
            continue
        a = m[len(prefix):].split(".")[0]
        for d in deps:
            if d.startswith(prefix):
                b = d[len(prefix):].split(".")[0]
                if a != b:
                    child[a].add(b)
    found = _circles(child)
    assert not found, f"siblings in {package} that import each other:\n" + "\n".join(
        f"{c}: {_ties(c, child)}" for c in found)


def test_the_packages_import_downward_only() -> None:
    """trainer -> reward_server -> sandbox, never back."""
    wrong = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() for d in deps
                   if (a := m.split(".")[0]) != (b := d.split(".")[0]) and b not in MAY_IMPORT[a])
    assert not wrong, "imports against trainer -> reward_server -> sandbox:\n" + "\n".join(wrong)


def test_the_runner_imports_the_standard_library_and_itself_only() -> None:
    stdlib = set(sys.stdlib_module_names)
    wrong = []
    for m in MODULES:
        if m != RUNNER and not m.startswith(RUNNER + "."):
            continue
        wrong += [f"{m} -> {d}" for d in sorted(GRAPH[m]) if d != RUNNER and not d.startswith(RUNNER + ".")]
        wrong += [f"{m} -> {d} (not the standard library)" for d in sorted(EXTERNAL[m]) if d not in stdlib]
    assert not wrong, "the runner runs inside the sandbox on the standard library alone:\n" + "\n".join(wrong)


def test_the_graph_is_read() -> None:
    """The reader sees what it should: a known import of each kind, so the checks above cannot
    pass on an empty graph."""
    assert len(MODULES) > 50
    assert "sandbox.jobs" in GRAPH["reward_server.schemas"]  # absolute, module level
    assert "sandbox.hosts.base" in GRAPH["sandbox.hosts.docker"]  # relative
    assert "sandbox.hosts.docker" in GRAPH["sandbox.hosts.kinds"]  # relative, inside a function
    assert "pydantic" in EXTERNAL["sandbox.jobs"]
    cycle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(cycle) == [["a", "b", "c"]]
