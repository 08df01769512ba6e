"""One place for each piece of plumbing: /proc is read only by gtui.core.procstat, and a flock is
taken only through gtui.core.flock. A second reader would drift from the first (a different
clock tick, a lock file opened without O_NOFOLLOW)."""

from __future__ import annotations

import ast

from tests.conftest import PACKAGE_DIR

APP = PACKAGE_DIR


def _code_strings(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of the code, docstrings left out (they may name /proc)."""
    docs: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def _offenders(check: str, allowed: str) -> list[str]:
    found = []
    for path in sorted(APP.rglob("*.py")):
        rel = str(path.relative_to(APP))
        if rel == allowed:
            continue
        tree = ast.parse(path.read_text())
        if check == "proc":
            for n in _code_strings(tree):
                if "/proc" in n.value:
                    found.append(f"{rel}:{n.lineno}: {n.value!r}")
        else:
            for n in ast.walk(tree):
                if isinstance(n, ast.Attribute) and n.attr in {"flock", "lockf"}:
                    found.append(f"{rel}:{n.lineno}: .{n.attr}")
    return found


def test_only_procstat_reads_proc() -> None:
    assert not _offenders("proc", "core/procstat.py")


def test_only_the_flock_helper_takes_a_flock() -> None:
    assert not _offenders("flock", "core/flock.py")


def test_the_guards_see_what_they_look_for() -> None:
    """Each guard finds its target in the one module allowed to hold it."""
    assert _offenders("proc", "") and _offenders("flock", "")
