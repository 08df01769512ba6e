"""How the suite is shared between pytest-xdist workers (tests/distribution.py): the tests that
use their module's module-scoped fixture share one xdist_group, so one worker sets the fixture up
once; grouped and slow tests are dealt first. Checked on the real collection of two modules, in a
pytest of its own (the order is the one the workers receive)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SECURITY = "tests/reliability/test_security.py"
PACKAGING = "tests/project/test_packaging.py"

# A plugin that prints, once collected, each test with its groups and slow mark, in order.
RECORDER = """
import json

def pytest_collection_finish(session):
    for item in session.items:
        groups = [str(m.args[0]) for m in item.iter_markers("xdist_group")]
        slow = item.get_closest_marker("slow") is not None
        print("ITEM " + json.dumps([item.nodeid, groups, slow]))
"""


def collected(tmp_path: Path, *paths: str) -> list[tuple[str, list[str], bool]]:
    (tmp_path / "recorder.py").write_text(RECORDER)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "recorder",
            "--randomly-seed=1",
            *paths,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return [
        tuple(json.loads(line[5:]))  # type: ignore[misc]
        for line in out.stdout.splitlines()
        if line.startswith("ITEM ")
    ]


def test_the_users_of_a_module_fixture_share_a_group_and_long_tests_come_first(
    tmp_path: Path,
) -> None:
    items = collected(tmp_path, SECURITY, PACKAGING)
    by_name = {nodeid.split("::")[1]: (groups, slow) for nodeid, groups, slow in items}
    # other_user is test_security.py's module-scoped fixture: its users are grouped ...
    for name in (
        "test_another_user_cannot_reach_the_control_socket",
        "test_another_user_cannot_make_gtui_run_a_command",
    ):
        assert by_name[name][0] == [SECURITY], by_name[name]
    # ... the module's other tests are not (they may run on any worker, at once).
    assert by_name["test_nothing_listens_on_a_network_port"][0] == []
    # Grouped and slow tests (the packaging tests are slow) come before all the others.
    first = [bool(groups) or slow for _, groups, slow in items]
    assert first == sorted(first, reverse=True), items
    assert any(slow for _, _, slow in items) and not all(first)
