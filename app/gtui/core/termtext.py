"""Text written by a job, made safe to put on the user's terminal.

A log is written by a program gtui does not control. Passed to a terminal as is, its escape
sequences act on that terminal: ``ESC c`` resets it, ``ESC #8`` fills it with E's, OSC 0/2 set
its title, OSC 52 writes the clipboard, ``CSI ?1049h`` switches screens, cursor moves draw over
the dashboard. Only colours and styles (SGR, ``ESC [ params m``) carry meaning worth keeping;
everything else is dropped. Pure and in the core: the dashboard's log panel uses it, and a
command that prints a log to a terminal will too.
"""

from __future__ import annotations

import re

# One alternative per ECMA-48 shape, longest first; a sequence cut off by the end of the text
# (a line cut at max_line, a log still being written) is dropped too. The ESC-led forms are
# also compiled on bytes (the log search's prefilter); the 8-bit C1 forms only on text, since
# in UTF-8 bytes 0x80-0x9f are parts of ordinary characters. This is gtui's only escape
# pattern (tests/core/test_one_stripper.py checks no other module spells one).
_ESC_FORMS = (
    r"\x1b\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI: SGR is kept, cursor moves etc. not
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, DCS, SOS, PM, APC up to BEL or ST
    r"|\x1b[\x20-\x2f]+[\x30-\x7e]?"  # nF: ESC # 8 (DECALN), ESC ( 0 (charsets)
    r"|\x1b[\x30-\x7e]?"  # Fp / Fe / Fs: ESC c (reset), ESC 7 / 8, ESC M; a lone ESC
)
_C1_FORMS = (
    r"|\x9b[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # the same as 8-bit C1 controls
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?"
)
_ESCAPE = re.compile(_ESC_FORMS + _C1_FORMS)
_ESCAPE_B = re.compile(_ESC_FORMS.encode("ascii"))
_START = re.compile(r"[\x1b\x90\x98\x9b\x9d-\x9f]")
_SGR_FORM = r"\x1b\[[0-9;:]*m"
_SGR = re.compile(_SGR_FORM)
_SGR_B = re.compile(_SGR_FORM.encode("ascii"))
_SGR_CUT_B = re.compile(rb"\x1b(?:\[[0-9;:]*)?\Z")  # the start of one, cut by the end of a read
# C0 controls but tab, DEL, and C1 controls (U+0080-U+009F: some terminals read U+009B as CSI).
# ESC is not here: after _ESCAPE, every ESC left starts a kept SGR.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1a\x1c-\x1f\x7f-\x9f]")


def _printable(text: str) -> bool:
    """Whether ``text`` holds no control at all but tabs: every escape starts with one (ESC or
    a C1 control), and Python counts none of them printable."""
    return text.isprintable() or ("\t" in text and text.replace("\t", "").isprintable())


def _keep_sgr(m: re.Match[str]) -> str:
    seq = m.group(0)
    return seq if _SGR.fullmatch(seq) else ""


def safe_text(text: str) -> str:
    """``text`` with every escape sequence but SGR removed, and every control but tab.

    Newlines and carriage returns go too: call it on one line (after resolving ``\\r``).
    """
    if _printable(text):  # nothing to drop (most lines): str's own test is many times faster
        return text
    if _START.search(text):
        text = _ESCAPE.sub(_keep_sgr, text)
    return _CONTROL.sub("", text)


def plain_text(text: str) -> str:
    """``text`` as plain characters: :func:`safe_text` less its colours too (what a diagnosis
    or a search reads)."""
    text = safe_text(text)
    return _SGR.sub("", text) if "\x1b" in text else text


def strip_escapes_bytes(data: bytes) -> bytes:
    """``data`` less every ESC-led escape sequence, colours included: the same pattern as
    :func:`safe_text`, for a prefilter that looks at raw log bytes without decoding them."""
    return _ESCAPE_B.sub(b"", data) if b"\x1b" in data else data


def strip_sgr_bytes(data: bytes) -> tuple[bytes, bytes]:
    """``data`` less its colour sequences (SGR), every other byte kept, for a log piped with
    NO_COLOR set; and the bytes at its end that may begin a colour sequence the next read
    ends (put them in front of it)."""
    if b"\x1b" not in data:
        return data, b""
    cut = _SGR_CUT_B.search(data)
    head, rest = (data[: cut.start()], data[cut.start() :]) if cut else (data, b"")
    return _SGR_B.sub(b"", head), rest
