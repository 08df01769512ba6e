"""Textual stylesheets shipped with gtui (a package so editable installs find them too)."""

from pathlib import Path

STYLES_DIR = Path(__file__).resolve().parent


def stylesheet(name: str) -> Path:
    """Return the path of the stylesheet ``name`` (e.g. ``"app.tcss"``)."""
    return STYLES_DIR / name
