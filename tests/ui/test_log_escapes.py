"""A job's log must not drive the user's terminal.

A log is written by a program we do not control: it can hold escape sequences that reset the
terminal, set its title, write the clipboard (OSC 52) or switch to the alternate screen. The
log panel shows colours and styles (SGR) only; everything else is dropped. Checked three ways:
the pure sanitizer per family, the rendered LogView in Pilot, and the dashboard in a real tmux.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual.app import App, ComposeResult

from gtui.core.termtext import _CONTROL, _ESCAPE, _keep_sgr, safe_text
from gtui.ui.logtail import clean_line
from gtui.ui.widgets.log_view import LogView
from tests.conftest import write_queue
from tests.tmux_helpers import sh, wait_screen

ESC = "\x1b"

# One sample per dangerous family: what it would do to a terminal that received it.
DANGEROUS: dict[str, str] = {
    "osc52_clipboard": f"{ESC}]52;c;cm0gLXJmIH4K\x07",
    "osc0_title": f"{ESC}]0;PWNED-TITLE\x07",
    "osc2_title_st": f"{ESC}]2;PWNED-TITLE{ESC}\\",
    "ris_reset": f"{ESC}c",
    "decaln": f"{ESC}#8",
    "cursor_home": f"{ESC}[H",
    "cursor_up": f"{ESC}[3A",
    "erase_display": f"{ESC}[2J",
    "dcs": f"{ESC}Pq#0;2;0;0;0#1~~{ESC}\\",
    "alt_screen": f"{ESC}[?1049h",
    "bell": "\x07",
    "charset": f"{ESC}(0",
    "save_cursor": f"{ESC}7",
    "c1_csi": "\x9b2J",
    "c1_osc": "\x9d0;PWNED-TITLE\x07",
}

# Cut off by the end of the line (a line cut at max_line, a log still being written): the
# rest of the line is the sequence's own, so only what comes before it stays.
TRUNCATED: dict[str, str] = {
    "lone_esc": ESC,
    "unfinished_csi": f"{ESC}[12;",
    "unfinished_osc": f"{ESC}]0;PWNED-TITLE",
    "unfinished_dcs": f"{ESC}Pq#0;2",
}

# What must never reach the terminal: ESC, BEL, C1 controls, other C0 controls but the tab.
FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("family", sorted(DANGEROUS))
def test_each_dangerous_family_is_dropped_and_the_text_around_it_kept(family: str) -> None:
    out = safe_text(f"before{DANGEROUS[family]}after")
    assert not FORBIDDEN.search(out), (family, out)
    assert out.startswith("before") and out.endswith("after"), (family, out)
    assert "PWNED-TITLE" not in out and "cm0gLXJmIH4K" not in out, (family, out)


@pytest.mark.parametrize("family", sorted(TRUNCATED))
def test_a_sequence_cut_off_by_the_end_of_the_line_is_dropped(family: str) -> None:
    assert safe_text(f"before{TRUNCATED[family]}") == "before"


@pytest.mark.parametrize(
    "sgr", [f"{ESC}[31m", f"{ESC}[0m", f"{ESC}[1;38;5;208m", f"{ESC}[38:2::255:0:0m", f"{ESC}[m"]
)
def test_colours_and_styles_pass(sgr: str) -> None:
    assert safe_text(f"a{sgr}b") == f"a{sgr}b"


def test_tabs_stay_and_plain_text_is_unchanged() -> None:
    line = "epoch 3\tloss 0.25 — ünïcode ✓"
    assert safe_text(line) == line


@given(
    st.text(
        alphabet=st.sampled_from(
            list("a \t\u00e9\u2713\x1b[31m;]0\x07\x9b\x90\x7f\x00\u00ad\u2028")
        ),
        max_size=40,
    )
)
def test_the_printable_shortcut_drops_what_the_patterns_drop(text: str) -> None:
    """A line with no control in it is returned as is, without the patterns: the same text
    they would have made of it, whatever the line holds."""
    slow = _CONTROL.sub("", _ESCAPE.sub(_keep_sgr, text))
    assert safe_text(text) == slow


def test_the_log_panel_line_cleaner_uses_it() -> None:
    raw = "x".join(DANGEROUS.values()) + f"{ESC}[32mok{ESC}[0m" + TRUNCATED["lone_esc"] + "\n"
    cleaned = clean_line(raw)
    assert cleaned.endswith(f"{ESC}[32mok{ESC}[0m"), repr(cleaned)
    assert not FORBIDDEN.search(cleaned.replace(f"{ESC}[32m", "").replace(f"{ESC}[0m", ""))


def hostile_log(path: Path) -> None:
    """A log with every family, each on its own line between visible markers, and a red word."""
    lines = [f"line-{name} <{seq}> end-{name}" for name, seq in sorted(DANGEROUS.items())]
    lines += [f"cut-{name} <{seq}" for name, seq in sorted(TRUNCATED.items())]
    lines.append(f"{ESC}[31mREDWORD{ESC}[0m")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


class _LogApp(App[None]):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        yield LogView(id="log")

    def on_mount(self) -> None:
        self.query_one(LogView).show(self.path)


async def test_the_rendered_log_panel_holds_no_escape_but_keeps_colours(tmp_path: Path) -> None:
    log = tmp_path / "hostile.log"
    hostile_log(log)
    app = _LogApp(log)
    async with app.run_test(size=(160, 40)) as pilot:
        view = app.query_one(LogView)
        deadline = 200
        while "REDWORD" not in view.text().plain and deadline:
            await pilot.pause(0.05)
            deadline -= 1
        assert "REDWORD" in view.text().plain, view.text().plain
        segments = [seg for y in range(view.size.height) for seg in view.render_line(y)]
        rendered = "".join(seg.text for seg in segments)
        for name in DANGEROUS:  # every line was shown, the visible text around the escape kept
            assert f"line-{name} <" in rendered and f"> end-{name}" in rendered, name
        for name in TRUNCATED:
            assert f"cut-{name} <" in rendered, name
        bad = sorted({repr(c) for c in rendered if FORBIDDEN.search(c)})
        assert not bad, bad
        assert "PWNED-TITLE" not in rendered
        red = [seg for seg in segments if seg.text == "REDWORD"]
        assert red and red[0].style is not None and red[0].style.color is not None
        assert red[0].style.color.number == 1  # ANSI red


@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_dashboard_in_tmux_shows_a_hostile_log_and_the_screen_stays_intact(
    tmux_server: Path,
    tmp_path: Path,
) -> None:
    """The job prints every family; the dashboard shows its log (the only job, selected). The
    pane keeps its title, stays on the main screen, and the GPU panel and header are still
    drawn: a reset, DECALN (a screen of E's) or an alternate-screen switch would change that."""
    hostile_log(tmp_path / "hostile.txt")
    write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "hostile"
        gpus = 0
        cmd = "cat hostile.txt; while [ ! -e release ]; do sleep 0.05; done"
        """,
    )
    # The server reads a config that lets panes set the clipboard (the default, "external",
    # ignores OSC 52 from panes and would make the paste-buffer check below vacuous).
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g set-clipboard on\n")
    # COLUMNS / LINES from the test's environment would make Textual lay out 80x24 in the
    # 160x60 pane, and the log panel would not show every line.
    command = (
        f"env -u COLUMNS -u LINES {sys.executable} -m gtui q.toml --no-tmux --fake-gpus 2x80G;"
        " sleep 60"
    )
    r = sh(
        "-f",
        str(conf),
        "new-session",
        "-d",
        "-x",
        "160",
        "-y",
        "60",
        "-s",
        "dash",
        "-c",
        str(tmp_path),
        command,
    )
    assert r.returncode == 0, r.stderr
    assert sh("show-options", "-gv", "set-clipboard").stdout.strip() == "on"
    target = "=dash:"
    title_before = sh("display", "-p", "-t", target, "#{pane_title}").stdout.strip()
    assert "PWNED" not in title_before
    try:
        wait_screen(target, "REDWORD", timeout=30)
        screen = wait_screen(target, "Fake A800 80G", timeout=30)  # the GPU panel, read
        for name in DANGEROUS:
            assert f"> end-{name}" in screen, f"{name}; the screen:\n{screen}"
        assert "SIMULATED GPUs" in screen, screen
        assert "EEEEEEEEEE" not in screen, screen  # DECALN fills the screen with E's
        title = sh("display", "-p", "-t", target, "#{pane_title}").stdout.strip()
        assert "PWNED" not in title, title
        # The clipboard (OSC 52) would land in tmux's paste buffers: none may hold the payload.
        buffers = sh("list-buffers", "-F", "#{buffer_sample}").stdout
        assert "rm -rf" not in buffers and "cm0gLXJmIH4K" not in buffers, buffers
    finally:
        (tmp_path / "release").touch()  # the job ends; the fixture kills the tmux server
