"""The dashboard's key reader: an Esc whose wait ran out is an Esc, whatever comes after it.

Textual's reader notices that its wait after an Esc ran out only between reads; a key read
first was joined to the Esc (one alt+key: both lost). Fed here as the terminal would send them:
the Esc, then (once its wait is over, as 0.1 s later in tmux) the key.
"""

from __future__ import annotations

import pytest
from textual import constants, events
from textual._time import get_time
from textual._xterm_parser import XTermParser

from gtui.ui import escape
from tests.waiting import wait_for


@pytest.fixture
def in_tmux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ESCDELAY", raising=False)
    monkeypatch.setattr(XTermParser, "feed", XTermParser.feed)  # undone after the test
    monkeypatch.setattr(constants, "ESCAPE_DELAY", constants.ESCAPE_DELAY)
    escape.install(in_tmux=True)


def keys_of(parser: XTermParser, data: str) -> list[str]:
    return [e.key for e in parser.feed(data) if isinstance(e, events.Key)]


@pytest.mark.usefixtures("in_tmux")
def test_an_esc_whose_wait_ran_out_is_an_esc_and_the_next_key_its_own() -> None:
    assert constants.ESCAPE_DELAY == escape.TMUX_ESCAPE_DELAY_S
    parser = XTermParser()
    assert keys_of(parser, "\x1b") == []  # maybe the start of a sequence: it waits
    since = get_time()
    wait_for(lambda: get_time() - since > constants.ESCAPE_DELAY, what="the Esc's wait to end")
    assert keys_of(parser, "P") == ["escape", "P"]


@pytest.mark.usefixtures("in_tmux")
def test_a_whole_sequence_is_still_one_key() -> None:
    parser = XTermParser()
    assert keys_of(parser, "\x1b[A") == ["up"]


def test_a_users_own_escdelay_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESCDELAY", "300")
    monkeypatch.setattr(XTermParser, "feed", XTermParser.feed)
    monkeypatch.setattr(constants, "ESCAPE_DELAY", 0.3)
    escape.install(in_tmux=True)
    assert constants.ESCAPE_DELAY == 0.3
