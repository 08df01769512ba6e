"""Keys in a real tmux: Esc then a key is two keys; the add form is typed in the order it shows.

Esc then a key, typed through a real terminal into gtui's tmux session: two keys, not one.

tmux waits ``escape-time`` after an Esc from a terminal to see whether a sequence follows (500 ms
by default before tmux 3.5); a key within it is merged with the Esc into one alt+key, and the key
is lost. The keys go to a pane of the tests' own server that runs ``gtui q.toml`` ($TMUX unset),
so they cross the attached tmux client as a user's keys do: ``send-keys`` straight into gtui's
pane would skip the parsing where they are lost.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from gtui.core import tmux
from gtui.core.paths import queue_paths
from tests.conftest import write_queue
from tests.tmux_helpers import PY, job_state, keys, outer, sh, status, wait_field, wait_screen
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
    pytest.mark.usefixtures("tmux_server"),
]

QUEUE = """
[settings]
poll = "0.3s"
kill_grace = "1s"

[[jobs]]
name = "long"
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"
"""

# How long after the Esc the user presses the next key: the scenario, not a wait for a result.
KEY_AFTER_ESC_S = 0.1


@pytest.mark.slow
def test_esc_then_a_key_a_tenth_of_a_second_later_acts_and_the_users_tmux_keeps_its_own(
    tmp_path: Path,
) -> None:
    queue = write_queue(tmp_path, QUEUE)
    name = queue_paths(queue).tmux_session
    sh("new-session", "-d", "-s", "mine", "sleep 600")  # the user's own tmux, with its defaults
    theirs = sh("show-options", "-s", "-v", "escape-time").stdout.strip()
    try:
        outer(tmp_path, "term", f"{PY} -m gtui --fake-gpus 1x80G q.toml", (100, 30))
        wait_for(lambda: tmux.has_session(name), what=f"the session {name}")
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        wait_screen("=term:", "running")
        keys("=term:", "Escape")  # on the table: it unmarks, or clears a filter
        time.sleep(KEY_AFTER_ESC_S)
        keys("=term:", "P")
        wait_for(lambda: status(queue).get("paused") is True, what="P after Esc to pause the queue")
        wait_screen("=term:", "PAUSED")
        # gtui's server took the short escape time; the user's server kept theirs.
        assert sh("show-options", "-s", "-v", "escape-time").stdout.strip() == theirs
        own = tmux._run(["show-options", "-s", "-v", "escape-time"]).stdout.strip()
        assert int(own) <= tmux.ESCAPE_TIME_MS, own
    finally:
        (tmp_path / "release").touch()


@pytest.mark.slow
def test_the_add_form_is_typed_in_the_order_it_shows_and_enter_on_the_last_field_adds(
    tmp_path: Path,
) -> None:
    """As a user reads the form: a name, enter, the command, enter, gpus, enter through the
    rest; enter on the last field adds. The top line says so."""
    queue = write_queue(tmp_path, QUEUE)
    try:
        outer(tmp_path, "term", f"{PY} -m gtui --no-tmux --fake-gpus 1x80G q.toml", (100, 30))
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        wait_screen("=term:", "running")
        keys("=term:", "a")
        shown = wait_screen("=term:", "Add a job to q.toml")
        flat = " ".join(shown.replace("│", " ").replace("┃", " ").split())
        assert "enter: next field, add on the last (env) · ctrl+s: add from any field" in flat
        wait_field("=term:", "name")  # the first field shown has the cursor
        keys("=term:", "hello", literal=True)
        keys("=term:", "Enter")
        wait_field("=term:", "cmd")
        keys("=term:", "echo hi", literal=True)
        keys("=term:", "Enter")
        wait_field("=term:", "gpus")
        keys("=term:", "0", literal=True)
        for field in ("mem", "priority", "after", "retries", "timeout", "cwd", "env"):
            keys("=term:", "Enter")
            wait_field("=term:", field)
        keys("=term:", "Enter")  # on the last field: adds
        wait_for(lambda: job_state(queue, "hello") == "done", what="the added job to run")
        text = queue.read_text()
        assert 'name = "hello"' in text and 'cmd = "echo hi"' in text and "gpus = 0" in text
    finally:
        (tmp_path / "release").touch()
