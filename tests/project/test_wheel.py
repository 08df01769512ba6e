"""The wheel is what ``pipx install .`` / ``uv tool install .`` install: built from a
clean checkout, it holds the styles, and installed into a fresh virtual environment its
``gtui`` answers ``--version``, ``python -m gtui`` works, and ``gtui validate`` checks a sample
queue.

Offline-safe: the wheel is built with ``--no-build-isolation`` (setuptools from this
environment) and installed with ``--no-deps``; the fresh environment reaches gtui's
dependencies through a path file naming this environment's site-packages, after its own, so
the ``gtui`` imported is the wheel's (checked), never this checkout's. Marked ``slow``; it runs
in CI with the rest of the suite.

As installing with ``--no-deps`` never looks at what the wheel says it needs, two checks stand
in for it, still offline: the wheel's ``Requires-Dist`` lines are exactly
pyproject.toml's dependencies and extras (the metadata pip resolves from, not a copy kept by
hand), and ``pip check`` in the fresh environment finds every dependency the wheel names
installed at an allowed version (the borrowed site-packages: those the suite runs on).
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement  # pytest's own dependency
from packaging.utils import canonicalize_name

from tests.conftest import REPO
from tests.project.test_packaging import clean_checkout, fresh_venv, pip_in

pytestmark = pytest.mark.slow


def _run(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # Without PYTHONPATH: one naming a checkout would put its gtui before the wheel's.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        list(cmd),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env=env,
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a clean checkout, offline."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = clean_checkout(tmp / "src")
    dist = tmp / "dist"
    built = _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(dist),
        str(src),
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (found,) = dist.glob("gtui-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed, the dependencies borrowed."""
    venv = fresh_venv(tmp_path_factory.mktemp("venv") / "venv")
    py = str(venv / "bin" / "python")
    installed = _run(*pip_in(venv), "install", "-q", "--no-deps", "--no-index", str(wheel))
    assert installed.returncode == 0, installed.stderr[-2000:]
    fresh_site = _run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    ours = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    Path(fresh_site.stdout.strip(), "zz_deps.pth").write_text("\n".join(dict.fromkeys(ours)) + "\n")
    return venv


def test_the_wheel_holds_the_styles_and_installs_a_working_gtui(
    wheel: Path, venv: Path, tmp_path: Path
) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    styles = [n for n in names if n.startswith("gtui/styles/") and n.endswith(".tcss")]
    assert "gtui/styles/app.tcss" in styles, names
    assert "gtui/__main__.py" in names and "gtui/commands/completion.py" in names

    py = str(venv / "bin" / "python")
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


_EXTRA = re.compile(r"""(?:\s+and\s+)?\(?\s*extra\s*==\s*["']([^"']+)["']\s*\)?""")


def _key(req: str) -> tuple[str, tuple[str, ...], str, str]:
    """A requirement as pip compares it: name, extras, versions, marker."""
    r = Requirement(req)
    marker = str(r.marker) if r.marker else ""
    return canonicalize_name(r.name), tuple(sorted(r.extras)), str(r.specifier), marker


def _wheel_requirements(wheel: Path) -> tuple[set[str], dict[str, set[tuple[str, ...]]]]:
    """The wheel's METADATA: its extras, and its Requires-Dist by extra ("" for none)."""
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        msg = Parser().parsestr(z.read(meta).decode("utf-8"))
    by_extra: dict[str, set[tuple[str, ...]]] = {}
    for line in msg.get_all("Requires-Dist") or []:
        req, _, marker = line.partition(";")
        m = _EXTRA.search(marker)
        extra = m.group(1) if m else ""
        rest = _EXTRA.sub("", marker).strip() if m else marker.strip()
        by_extra.setdefault(extra, set()).add(_key(f"{req}; {rest}" if rest else req))
    return set(msg.get_all("Provides-Extra") or []), by_extra


def test_the_wheel_declares_what_pyproject_declares(wheel: Path) -> None:
    """What pip would install with the wheel is pyproject.toml's list, bounds and all."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras, by_extra = _wheel_requirements(wheel)
    assert by_extra.pop("", set()) == {_key(r) for r in project["dependencies"]}
    declared = project["optional-dependencies"]
    assert extras == set(declared)
    assert by_extra == {x: {_key(r) for r in reqs} for x, reqs in declared.items()}


def test_pip_check_finds_every_dependency_the_wheel_names(venv: Path) -> None:
    """Installed with --no-deps, yet each runtime dependency the wheel declares is there, at a
    version its bound allows. Only gtui's own lines count: the borrowed environment's other
    packages are not this test's business."""
    checked = _run(*pip_in(venv), "check")
    ours = [line for line in checked.stdout.splitlines() if line.lower().startswith("gtui ")]
    assert ours == [], "\n".join(ours)
    assert checked.returncode == 0 or "gtui" not in checked.stdout.lower(), checked.stdout
