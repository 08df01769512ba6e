"""The soak and benchmark suites are run by hand or by CI's quick run, not imported by the
tests: a module moved by a refactor (gtui.core.engine -> gtui.core.sched.engine) left
``python -m soak`` broken at its dashboard part without any test noticing. Each of their
modules must at least import."""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import REPO

MODULES = sorted(
    f"{folder}.{p.stem}"
    for folder in ("soak", "benchmarks")
    for p in (REPO / folder).glob("*.py")
    if p.stem != "__main__"
)


def test_there_are_modules_to_check() -> None:
    assert {"soak.dashboard", "soak.crash", "benchmarks.scale"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_each_soak_and_benchmark_module_imports(module: str) -> None:
    importlib.import_module(module)

