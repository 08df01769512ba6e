"""`pip install .` and `pip install -e .` from a clean checkout both give a `gtui` command that
finds its styles. Each runs in a fresh virtual environment."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def clean_checkout(dest: Path) -> Path:
    """The tracked files only, as a clean clone would have them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    for rel in filter(None, listed.stdout.split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def fresh_venv(venv: Path) -> Path:
    """A new virtual environment without a pip of its own: ensurepip costs seconds a venv, and
    ``pip_in`` installs into it with this environment's pip."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    return venv


def pip_in(venv: Path) -> list[str]:
    """This environment's pip acting on ``venv`` (``pip --python``): what it installs and checks
    is ``venv``'s, as with the venv's own pip."""
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]


@pytest.mark.parametrize("editable", [False, True], ids=["pip-install", "pip-install-e"])
def test_installed_gtui_finds_its_styles(tmp_path: Path, editable: bool) -> None:
    src = clean_checkout(tmp_path / "src")
    venv = fresh_venv(tmp_path / "venv")
    pip = [*pip_in(venv), "install", "-q", "--no-deps"]
    install = subprocess.run(
        [*pip, *(["-e"] if editable else []), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    version = subprocess.run(
        [str(venv / "bin" / "gtui"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and version.stdout.startswith("gtui "), version.stderr
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from gtui.styles import stylesheet; p = stylesheet('app.tcss'); "
            "assert p.is_file() and p.stat().st_size > 0, p; print(p)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # not the checkout: the import must come from the installed package
    )
    assert where.returncode == 0, where.stderr
    styles = Path(where.stdout.strip())
    # Every package of the source tree is installed (a missing one would only fail at run time).
    package = src / "app" / "gtui"
    packages = sorted(
        "gtui." + ".".join(p.parent.relative_to(package).parts)
        for p in package.rglob("__init__.py")
        if p.parent != package
    )
    found = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.util, sys; "
            "missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]; "
            "print(' '.join(missing)); sys.exit(1 if missing else 0)",
            *packages,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert found.returncode == 0, f"not installed: {found.stdout} {found.stderr}"
    if editable:
        assert styles.is_relative_to(src), styles
    else:
        assert styles.is_relative_to(venv), styles
