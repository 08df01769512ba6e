"""No class in the package is over 500 lines: a reader holds a class in mind whole, and one that
grows past that is a part waiting to be split out (the engine's own, tighter bound is checked
with its parts)."""

from __future__ import annotations

import ast

from tests.conftest import PACKAGE_DIR

MAX_CLASS_LINES = 500


def class_sizes() -> dict[str, int]:
    """Every class of the package (nested ones too), as ``path:Name``, with its lines from
    ``class`` to its last line."""
    sizes: dict[str, int] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                where = f"{path.relative_to(PACKAGE_DIR.parent)}:{node.name}"
                sizes[where] = node.end_lineno - node.lineno + 1
    return sizes


def test_the_walk_finds_the_classes() -> None:
    """A walk that found nothing would pass the check below vacuously."""
    sizes = class_sizes()
    assert "gtui/core/sched/engine.py:Engine" in sizes
    assert "gtui/ui/widgets/job_table.py:JobTable" in sizes
    assert len(sizes) > 100


def test_no_class_over_500_lines() -> None:
    over = {where: n for where, n in class_sizes().items() if n > MAX_CLASS_LINES}
    assert not over, f"classes over {MAX_CLASS_LINES} lines (split a part out): {over}"
