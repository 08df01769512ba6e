"""The wheel is what ``pipx install .`` / ``uv tool install .`` install (issue 22.7): built from a
clean checkout, it holds the styles, and installed into a fresh virtual environment its
``gtui`` answers ``--version``, ``python -m gtui`` works, and ``gtui validate`` checks a sample
queue.

Offline-safe: the wheel is built with ``--no-build-isolation`` (setuptools from this
environment) and installed with ``--no-deps``; the fresh environment reaches gtui's
dependencies through a path file naming this environment's site-packages, after its own, so
the ``gtui`` imported is the wheel's (checked), never this checkout's. Marked ``slow``; it runs
in CI with the rest of the suite.
"""

from __future__ import annotations

import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_packaging import clean_checkout

pytestmark = pytest.mark.slow


def _run(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(cmd), capture_output=True, text=True, timeout=300, cwd=cwd, stdin=subprocess.DEVNULL
    )


def test_the_wheel_holds_the_styles_and_installs_a_working_gtui(tmp_path: Path) -> None:
    src = clean_checkout(tmp_path / "src")
    dist = tmp_path / "dist"
    built = _run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "-w", str(dist), str(src),
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("gtui-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    styles = [n for n in names if n.startswith("gtui/styles/") and n.endswith(".tcss")]
    assert "gtui/styles/app.tcss" in styles, names
    assert "gtui/__main__.py" in names and "gtui/commands/completion.py" in names

    venv = tmp_path / "venv"
    assert _run(sys.executable, "-m", "venv", str(venv)).returncode == 0
    py = str(venv / "bin" / "python")
    installed = _run(py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel))
    assert installed.returncode == 0, installed.stderr[-2000:]
    fresh_site = _run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    ours = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    Path(fresh_site.stdout.strip(), "zz_deps.pth").write_text("\n".join(dict.fromkeys(ours)) + "\n")

    where = _run(py, "-c", "import gtui, gtui.styles; print(gtui.__file__)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel's gtui, not the checkout's

    version = _run(str(venv / "bin" / "gtui"), "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("gtui "), version.stderr
    as_module = _run(py, "-m", "gtui", "--version", cwd=tmp_path)
    assert as_module.stdout == version.stdout, as_module.stderr

    sample = REPO / "sample_queues" / "pipeline.toml"
    valid = _run(str(venv / "bin" / "gtui"), "validate", str(sample), cwd=tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "prep" in valid.stdout or "job" in valid.stdout, valid.stdout
