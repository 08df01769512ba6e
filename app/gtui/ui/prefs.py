"""The dashboard's own settings, kept between runs: for now its theme.

They live in ``config_dir()/config.toml`` (``$XDG_CONFIG_HOME/gtui/config.toml``), a file the
user may also edit by hand. A new file is written from nothing with tomli-w; an existing one is
edited with tomlkit, so the user's comments and other keys stay. The folder is 0700 and the
file 0600: it is nobody else's business. Nothing here may stop the dashboard: a file that does
not parse, or a theme this Textual does not have, is ignored (and a broken file is never
overwritten).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import tomli_w
import tomlkit
from tomlkit.exceptions import ParseError

from gtui.core.atomic import write_atomically
from gtui.core.errors import GtuiError
from gtui.core.paths import config_dir, ensure_private_dir

CONFIG = "config.toml"


def config_file() -> Path:
    return config_dir() / CONFIG


def saved_theme() -> str | None:
    """The theme saved last, or None (no file, a broken file, no string ``theme``)."""
    try:
        data = tomllib.loads(config_file().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    theme = data.get("theme")
    return theme if isinstance(theme, str) and theme else None


def save_theme(theme: str) -> bool:
    """Write ``theme = "..."``; False when it could not be (a broken file is left as it is,
    a read-only home is not an error worth a traceback)."""
    path = config_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError):
        return False
    try:
        if text is None:
            new = tomli_w.dumps({"theme": theme})
        else:
            doc = tomlkit.parse(text)
            if doc.get("theme") == theme:
                return True
            doc["theme"] = theme
            new = tomlkit.dumps(doc)
        ensure_private_dir(path.parent)
        write_atomically(path, new, mode=0o600)
    except (OSError, GtuiError, ParseError):
        return False
    return True
