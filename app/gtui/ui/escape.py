"""Esc then a key is two keys: the key reader's two gaps that merged them, closed.

Textual's terminal reader waits ``ESCDELAY`` (100 ms) after an Esc to see whether a sequence
follows, but only checks that wait between its 0.1 s reads: a key that comes 0.1 s after the
Esc is read before the expired wait is noticed, and the two are taken as one alt+key (the
key is lost, the Esc too). ``install`` makes the reader apply an expired wait before it
reads what came after it. In tmux (gtui's own session, or the user's), tmux has already cut
the terminal's input into whole keys (``escape-time``, core/tmux.py), so the wait itself is
shortened to ``TMUX_ESCAPE_DELAY_S`` there; a plain terminal keeps Textual's, for a slow link
that splits a sequence. A user's own ``$ESCDELAY`` is kept.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from textual import constants
from textual._xterm_parser import XTermParser
from textual.message import Message

TMUX_ESCAPE_DELAY_S = 0.025

_textual_feed = XTermParser.feed


def _feed(self: XTermParser, data: str) -> Iterator[Message]:
    """An Esc whose wait ran out before ``data`` came is an Esc, then ``data`` is read."""
    yield from self.tick()
    yield from _textual_feed(self, data)


def install(*, in_tmux: bool) -> None:
    """Apply both fixes for this process (idempotent)."""
    XTermParser.feed = _feed  # type: ignore[method-assign]
    if in_tmux and "ESCDELAY" not in os.environ:
        constants.ESCAPE_DELAY = TMUX_ESCAPE_DELAY_S  # type: ignore[misc]
