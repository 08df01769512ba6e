"""The dashboard's theme is saved in the XDG config directory and comes back.

Pilot over a real Engine and queue file, with ``XDG_CONFIG_HOME`` pointed at a temporary
folder: the theme chosen (as the command palette's theme picker sets it) is written to
``$XDG_CONFIG_HOME/gtui/config.toml``, private to the user, and the next dashboard starts in
it. A config file the user broke, or a theme this Textual does not have, leaves the default.
"""

from __future__ import annotations

import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard
from tests.ui.test_ui_app import QUEUE
from tests.waiting import pilot_until as until


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    yield home


def _saved(config_home: Path) -> dict[str, object]:
    path = config_home / "gtui" / "config.toml"
    return tomllib.loads(path.read_text()) if path.is_file() else {}


async def test_the_chosen_theme_is_saved_and_restored(tmp_path: Path, config_home: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    async with dashboard(q) as (app, pilot, _engine):
        default = app.theme
        chosen = next(t for t in ("nord", "gruvbox", "dracula") if t != default)
        app.theme = chosen  # what the palette's "Change theme" does
        await until(pilot, lambda: _saved(config_home).get("theme") == chosen, what="saved")
    folder = config_home / "gtui"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "config.toml").stat().st_mode) == 0o600
    async with dashboard(q) as (app, pilot, _engine):
        assert app.theme == chosen


async def test_a_comment_in_the_config_file_survives_a_save(
    tmp_path: Path, config_home: Path
) -> None:
    folder = config_home / "gtui"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text('# my settings\ntheme = "nord"  # dark\n')
    q = write_queue(tmp_path, QUEUE)
    async with dashboard(q) as (app, pilot, _engine):
        assert app.theme == "nord"
        app.theme = "gruvbox"
        await until(pilot, lambda: _saved(config_home).get("theme") == "gruvbox", what="saved")
    text = (folder / "config.toml").read_text()
    assert text.startswith("# my settings\n") and "# dark" in text, text


@pytest.mark.parametrize(
    "content", ['theme = "no-such-theme"\n', "theme = [unclosed\n", "theme = 3\n"]
)
async def test_a_bad_config_leaves_the_default_theme(
    tmp_path: Path, config_home: Path, content: str
) -> None:
    folder = config_home / "gtui"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(content)
    q = write_queue(tmp_path, QUEUE)
    async with dashboard(q) as (app, _pilot, _engine):
        assert app.theme == "textual-dark"
    assert (folder / "config.toml").read_text() == content  # not rewritten behind the user
