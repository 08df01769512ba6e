"""No import cycles anywhere in the ``gtui`` package.

The import graph is built statically with ``ast`` from every ``*.py`` under ``app/gtui/`` (the
``gtui`` package), so a new module is checked the day it is added. Every ``import`` and
``from ... import`` node counts, wherever it stands: at the top, inside a function (a lazy
import), or under ``if TYPE_CHECKING:``. A lazy import only hides a cycle until the day
someone moves it to the top of the file, so it is a cycle all the same.

Edges:

* ``import gtui.a.b`` -> ``gtui.a.b``.
* ``from gtui.a import b`` -> ``gtui.a.b`` when that module exists, else ``gtui.a`` (``b`` is a
  name defined in ``gtui/a.py`` or in ``gtui/a/__init__.py``).
* Relative imports are resolved against the importing module's package.
* An edge to a package's ``__init__`` is counted only when the package itself is what is
  imported (``import gtui.core``, ``from gtui.core import some_name``), not for every import of
  one of its submodules, though Python does run the parent ``__init__`` first.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.conftest import PACKAGE_DIR as APP
from tests.conftest import REPO

PACKAGE = "gtui"

# Edges the walk must find, so that the check cannot pass vacuously on an empty or broken graph.
KNOWN_EDGES = {
    ("gtui.__main__", "gtui.entry"),  # from gtui.entry import main
    ("gtui.entry", "gtui.cli"),  # lazy: every command line but a plain add
    ("gtui.cli", "gtui.core.errors"),  # top-level from-import of names
    ("gtui.cli", "gtui.commands.dashboard"),  # lazy `from gtui.commands import dashboard`
    ("gtui.cli", "gtui.commands.options"),  # where GlobalOptions lives
    ("gtui.commands.kill", "gtui.commands._jobcmd"),  # from-import of a submodule
    ("gtui.commands.attach", "gtui.core.tmux"),  # `from gtui.core import tmux`
    ("gtui.commands.dashboard", "gtui.ui.app"),  # import inside a function
}


def module_name(path: Path, root: Path = APP, package: str = PACKAGE) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def discover(root: Path = APP, package: str = PACKAGE) -> dict[str, Path]:
    """Module name -> file, for every module of the package."""
    return {module_name(p, root, package): p for p in sorted(root.rglob("*.py"))}


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".")
    if not is_package:
        base = base[:-1]  # a module's relative imports are relative to its package
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *(module.split(".") if module else [])])


def imports_of(
    name: str, path: Path, modules: Iterable[str], package: str = PACKAGE
) -> dict[str, list[int]]:
    """The package modules that ``name`` (in file ``path``) imports -> the lines that do it."""
    known = set(modules)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    edges: dict[str, list[int]] = {}

    def add(target: str, line: int) -> None:
        if target in known and target != name:
            edges.setdefault(target, []).append(line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(name, is_package, node.level, node.module)
            else:
                base = node.module or ""
            if base != package and not base.startswith(package + "."):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in known else base, node.lineno)
    return edges


def import_graph(
    root: Path = APP, package: str = PACKAGE
) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[int]], dict[str, Path]]:
    """(graph, lines of each edge, files) of the package."""
    files = discover(root, package)
    graph: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], list[int]] = {}
    for name, path in files.items():
        edges = imports_of(name, path, files, package)
        graph[name] = set(edges)
        for target, where in edges.items():
            lines[(name, target)] = where
    return graph, lines, files


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit), in a deterministic order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    succ = {n: sorted(graph.get(n, ())) for n in nodes}

    for start in nodes:
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            recursed = False
            children = succ[node]
            while i < len(children):
                child = children[i]
                i += 1
                if child not in index:
                    work.append((node, i))
                    work.append((child, 0))
                    recursed = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if recursed:
                continue
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def describe(
    cycles: list[list[str]],
    graph: Mapping[str, set[str]],
    lines: Mapping[tuple[str, str], list[int]],
    files: Mapping[str, Path],
) -> str:
    out = []
    for members in cycles:
        inside = set(members)
        out.append("cycle: " + ", ".join(members))
        for src in members:
            for dst in sorted(graph[src] & inside):
                rel = files[src].relative_to(REPO)
                where = ", ".join(f"{rel}:{n}" for n in lines[(src, dst)])
                out.append(f"    {src} -> {dst}  ({where})")
    return "\n".join(out)


def test_no_import_cycles() -> None:
    graph, lines, files = import_graph()
    assert len(graph) >= 60, f"the walk found only {len(graph)} modules under {APP}"
    missing = {e for e in KNOWN_EDGES if e[1] not in graph.get(e[0], set())}
    assert not missing, f"edges the walk should have found: {sorted(missing)}"

    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert not cycles, "import cycles in gtui:\n" + describe(cycles, graph, lines, files)


def test_cycle_finder_finds_cycles() -> None:
    """The check above is only as good as the cycle finder: show it on a small graph."""
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": {"e"},
        "e": {"d"},
        "f": {"a"},
        "g": set(),
    }
    sccs = [c for c in strongly_connected(graph) if len(c) > 1]
    assert sorted(sccs) == [["a", "b", "c"], ["d", "e"]]


def test_import_resolution(tmp_path: Path) -> None:
    """Lazy imports count, submodules resolve, names resolve to their module, relative too."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .one import thing\n")
    (pkg / "sub" / "one.py").write_text("thing = 1\n")
    (pkg / "sub" / "two.py").write_text(
        "from pkg.sub import one\ndef f():\n    import pkg.top\n    from . import thing\n"
    )
    (pkg / "top.py").write_text("from pkg.sub.one import thing\nimport os\n")
    graph, lines, _ = import_graph(pkg, "pkg")
    assert graph == {
        "pkg": set(),
        "pkg.sub": {"pkg.sub.one"},
        "pkg.sub.one": set(),
        "pkg.sub.two": {"pkg.sub.one", "pkg.top", "pkg.sub"},
        "pkg.top": {"pkg.sub.one"},
    }
    assert lines[("pkg.sub.two", "pkg.top")] == [3]
