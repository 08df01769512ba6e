"""Declared dependencies say what gtui needs.

Every runtime dependency is imported by code under app/gtui/ (one nobody imports is a defect: it
costs every user an install for nothing); everything app/gtui/ imports from outside the standard
library is declared; the lowest allowed versions CI installs (.ci/lowest.txt) are exactly the
lower bounds pyproject.toml declares, so the two cannot drift apart; the Pythons said are the
Pythons tested.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib

from tests.conftest import PACKAGE_DIR, REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
# A distribution's name on PyPI -> the module it is imported as, where they differ.
IMPORT_NAME = {"nvidia-ml-py": "pynvml", "tomli-w": "tomli_w"}


def _name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower()


def _lower_bound(req: str) -> str:
    m = re.search(r">=\s*([0-9][0-9A-Za-z.]*)", req)
    assert m, f"{req}: every dependency needs a lower bound (>=)"
    return m.group(1)


def _imported_top_modules() -> set[str]:
    found: set[str] = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_runtime_dependency_is_imported_by_app_code() -> None:
    imported = _imported_top_modules()
    unused = [
        req
        for req in PYPROJECT["project"]["dependencies"]
        if IMPORT_NAME.get(_name(req), _name(req).replace("-", "_")) not in imported
    ]
    assert unused == [], f"declared but never imported by app/gtui/: {unused}"


def test_everything_app_imports_from_outside_is_declared() -> None:
    project = PYPROJECT["project"]
    # The optional extras (ray, notify) count: their modules are imported lazily, only where
    # the user asked for them (tests/core/exec/test_ray_lazy.py proves it for Ray).
    extras = [
        r
        for group, reqs in project["optional-dependencies"].items()
        if group != "test"
        for r in reqs
    ]
    declared = {
        IMPORT_NAME.get(_name(r), _name(r).replace("-", "_"))
        for r in [*project["dependencies"], *extras]
    }
    outside = {
        m
        for m in _imported_top_modules()
        if m not in sys.stdlib_module_names and m not in ("gtui", "__future__")
    }
    assert outside <= declared, f"imported but not declared: {sorted(outside - declared)}"


def test_the_lowest_versions_ci_installs_are_the_declared_lower_bounds() -> None:
    pins = {}
    for line in (REPO / ".ci" / "lowest.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    runtime = PYPROJECT["project"]["dependencies"]
    test = PYPROJECT["project"]["optional-dependencies"]["test"]
    for req in [*runtime, *test]:
        assert pins.get(_name(req)) == _lower_bound(req), (req, pins.get(_name(req)))


def test_the_pythons_said_are_311_to_313() -> None:
    project = PYPROJECT["project"]
    assert project["requires-python"] == ">=3.11"
    said = {c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if "Python :: 3." in c}
    assert {"3.11", "3.12", "3.13"} <= said, said
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "python_for 3.11" in ci and "python_for 3.13" in ci  # the oldest and the newest run
