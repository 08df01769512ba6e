"""Shared test helpers: queue files in tmp dirs, and running the real `gtui` as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The gtui package in the source tree (src layout: app/ is the source root).
PACKAGE_DIR = REPO / "app" / "gtui"


@pytest.fixture(autouse=True)
def _private_runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test session gets its own socket directory and its own board of neighbours' claims
    (the machine's is not touched, nor read), and no fake GPUs leak in from outside."""
    runtime = tmp_path_factory.getbasetemp() / "xdg-runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    old = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "GTUI_FAKE_GPUS", "GTUI_CLAIMS_DIR")}
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    os.environ["GTUI_CLAIMS_DIR"] = str(tmp_path_factory.getbasetemp() / "claims")
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
