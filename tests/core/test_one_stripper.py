"""One ANSI-escape stripper in gtui, tested against the dangerous families.

gtui had three: the log panel's (``gtui.core.termtext``), a byte copy of it for the log
search's prefilter, and the diagnosis's own weaker one, which let C1 controls and DCS strings
through into the diagnosis panel and ``gtui status``. Now every reader of a job's text goes
through ``gtui.core.termtext``; this file proves each of them drops the same families.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gtui.core.diagnosis.diagnose import clean_line as diagnosis_line
from gtui.core.termtext import plain_text, safe_text, strip_escapes_bytes
from gtui.ui.logtail import SearchQuery
from gtui.ui.logtail import clean_line as panel_line
from tests.conftest import PACKAGE_DIR as APP

ESC = "\x1b"

# The escape families a job's log must never pass to the terminal, one sample each, with what it would do.
FAMILIES: dict[str, str] = {
    "osc52_clipboard": f"{ESC}]52;c;cm0gLXJmIH4K\x07",  # writes the clipboard
    "osc8_hyperlink": f"{ESC}]8;;https://evil.example/{ESC}\\",  # a link hiding its target
    "osc0_title": f"{ESC}]0;PWNED\x07",  # sets the window title
    "osc2_title_st": f"{ESC}]2;PWNED{ESC}\\",
    "dcs": f"{ESC}Pq#0;2;0;0;0#1~~{ESC}\\",  # sixel / device control string
    "csi_private": f"{ESC}[?1049h",  # the alternate screen
    "csi_private_cursor": f"{ESC}[?25l",  # hides the cursor
    "csi_cursor": f"{ESC}[3A",
    "c1_csi": "\x9b2J",  # 8-bit CSI: erase the display
    "c1_osc": "\x9d0;PWNED\x07",
    "c1_dcs": "\x90q#0;2\x9c",
    "ris_reset": f"{ESC}c",
    "decaln": f"{ESC}#8",
    "lone_esc": ESC,
}
# An ESC or an 8-bit CSI / OSC in a pattern, written as the character or as its escape.
ESC_IN_PATTERN = re.compile(r"[\x1b\x9b\x9d]|\\x1b|\\x9b|\\033|\\e\b")
FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _text(family: str) -> str:
    """The sequence between two words; a lone ESC ends its line (before a letter, ESC and the
    letter are one sequence, as a terminal reads them)."""
    if family == "lone_esc":
        return f"beforeafter{ESC}"
    return f"before{FAMILIES[family]}after"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_diagnosis_drops_each_family(family: str) -> None:
    out = diagnosis_line(_text(family))
    assert out == "beforeafter", repr(out)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_plain_text_drops_each_family_and_colours_too(family: str) -> None:
    out = plain_text(f"{ESC}[31m{_text(family)}{ESC}[0m")
    assert not FORBIDDEN.search(out) and ESC not in out, repr(out)
    assert out.startswith("before") and "PWNED" not in out and "evil" not in out, repr(out)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_log_panel_and_diagnosis_agree(family: str) -> None:
    """What the panel shows, less its colours, is what the diagnosis reads."""
    shown = plain_text(panel_line(_text(family)))
    assert shown == diagnosis_line(_text(family))
    assert safe_text(_text(family)) == shown


@pytest.mark.parametrize("family", sorted(f for f in FAMILIES if not f.startswith("c1")))
def test_the_search_prefilter_never_hides_a_line_the_panel_shows(family: str) -> None:
    """The byte form is the same pattern: the text left between escapes is still found."""
    raw = (_text(family) + "\n").encode()
    assert SearchQuery("beforeafter").may_be_in(raw)
    assert strip_escapes_bytes(raw).startswith(b"before")
    assert b"PWNED" not in strip_escapes_bytes(raw)


def test_non_ascii_text_survives_the_byte_form() -> None:
    """UTF-8 continuation bytes (0x80-0x9f) are not C1 controls in bytes: kept whole."""
    raw = "ü ː ✓ — naïve".encode()
    assert strip_escapes_bytes(raw) == raw


def _compiled_patterns(path: Path) -> list[str]:
    """The string and bytes constants that flow into ``re.compile(...)`` calls of a module,
    names resolved one level (``re.compile(_FORMS + _C1)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    consts: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                consts[target.id] = _literal(node.value, {})
    return [
        _literal(node.args[0], consts)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "compile"
        and node.args
    ]


def _literal(node: ast.AST, consts: dict[str, str]) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        v = node.value
        return v.decode("latin-1") if isinstance(v, bytes) else v
    if isinstance(node, ast.Name):
        return consts.get(node.id, "")
    return "".join(_literal(child, consts) for child in ast.iter_child_nodes(node))


def test_there_is_one_escape_pattern_in_the_package() -> None:
    """No module but gtui.core.termtext compiles an escape-sequence regex of its own (gtui's
    own output may still write a sequence, such as ``ESC[K``: that strips nothing)."""
    owners = sorted(
        str(p.relative_to(APP))
        for p in APP.rglob("*.py")
        if any(ESC_IN_PATTERN.search(pat) for pat in _compiled_patterns(p))
    )
    assert owners == ["core/termtext.py"], owners
