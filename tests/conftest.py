"""Shared test helpers and fixtures: queue files in tmp dirs, the real `gtui` as a subprocess,
and a private tmux server per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gtui.core import tmux

if TYPE_CHECKING:
    from tests.cli_helpers import Procs

REPO = Path(__file__).resolve().parent.parent
# The tests' own folder, where their data lives (fake_pynvml, corpora, broken queues): found
# from here, so a test file anywhere below it reads the same path.
TESTS = REPO / "tests"
# The gtui package in the source tree (src layout: app/ is the source root).
PACKAGE_DIR = REPO / "app" / "gtui"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Share the suite well between pytest-xdist workers (tests/distribution.py). Runs after
    pytest-randomly's shuffle (a wrapper) and before pytest-xdist reads the xdist_group marks."""
    from tests.distribution import group_shared_fixture_users, long_ones_first

    group_shared_fixture_users(items)
    long_ones_first(items)


@pytest.fixture(autouse=True)
def _private_runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test session gets its own socket directory, its own board of neighbours' claims and
    its own settings and cache folders (the machine's and the user's are not touched, nor read),
    and no fake GPUs leak in from outside. Under pytest-xdist each worker is a session with a
    base temp folder of its own, so workers share none of these."""
    base = tmp_path_factory.getbasetemp()
    runtime = base / "xdg-runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    names = (
        "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "GTUI_FAKE_GPUS",
        "GTUI_CLAIMS_DIR",
    )
    old = {k: os.environ.get(k) for k in names}
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    os.environ["XDG_CONFIG_HOME"] = str(base / "xdg-config")
    os.environ["XDG_CACHE_HOME"] = str(base / "xdg-cache")
    os.environ["GTUI_CLAIMS_DIR"] = str(base / "claims")
    os.environ.pop("GTUI_FAKE_GPUS", None)
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def write_queue(directory: Path, body: str, name: str = "q.toml") -> Path:
    """Write a queue file from an indented triple-quoted string."""
    path = directory / name
    path.write_text(textwrap.dedent(body).lstrip())
    return path


# The queue of a test module that names none: one job that does nothing.
ONE_JOB = "[[jobs]]\ncmd = 'true'\n"


@pytest.fixture
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The test module's ``QUEUE`` written to q.toml in the test's own folder (ONE_JOB where the
    module has none). A module that needs more around it (a folder, a cleanup) overrides this
    fixture with one that takes ``queue`` and adds it."""
    return write_queue(tmp_path, getattr(request.module, "QUEUE", ONE_JOB))


def gtui(*args: str, timeout: float = 60, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run the real command line (`python -m gtui ...`) and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "gtui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        **kw,  # type: ignore[arg-type]
    )


def status_of(queue: Path | str) -> dict[str, Any]:
    """The queue's status, the document ``gtui status --json`` prints, asked in this process
    through the Python API (``gtui.status``: the same request to the same scheduler or store).
    A test that polls the status pays no interpreter start per look; tests of the command's own
    output call ``gtui("status", ...)``."""
    from gtui import scripting

    return scripting.status(queue)


def jobs_of(queue: Path | str) -> dict[str, dict[str, Any]]:
    """``status_of(queue)``'s jobs by name."""
    return {j["name"]: j for j in status_of(queue)["jobs"]}


def gtui_here(*args: str) -> subprocess.CompletedProcess[str]:
    """``gtui(...)`` run in this process (``gtui.cli.main``), as the same completed process: no
    interpreter to start and no package to import again, so a test that checks a command's
    answer many times pays for none of that. Keep at least one real subprocess per command
    (``gtui(...)``) for the command line end to end."""
    import contextlib
    import io

    from gtui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse: --help, usage errors
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return subprocess.CompletedProcess(["gtui", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture
def tmux_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private tmux server for this test, killed afterwards: its own TMUX_TMPDIR holds the
    sockets of both the tests' terminals (``tmux``) and gtui's own server (``tmux -L gtui``), so
    tests running at once never share a server. The folder is in /tmp: a socket's path is short.
    """
    d = Path(tempfile.mkdtemp(prefix="gtmux", dir="/tmp"))
    monkeypatch.setenv("TMUX_TMPDIR", str(d))
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TMUX_PANE", raising=False)
    yield d
    subprocess.run(["tmux", "kill-server"], capture_output=True)
    subprocess.run([*tmux.server_argv(), "kill-server"], capture_output=True)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def procs() -> Iterator[Procs]:
    """The real ``gtui`` processes a command-line test starts (tests/cli_helpers.py), each ended
    after the test with its jobs' process trees."""
    from tests.cli_helpers import cleaned_procs  # it imports this module: not at the top

    yield from cleaned_procs()
