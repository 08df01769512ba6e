"""The dashboard asks the core whether a key's command applies, and shows the core's reason word
for word: no rule of its own beside ``transitions.why_not_*`` and the queue file's rewrite.

Pilot over a real Engine, real queue file and processes; only the GPUs are fake.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.errors import QueueFileError
from gtui.core.model import JobRecord, JobState
from gtui.core.queue.queuefile import load_queue
from gtui.core.queue.writeback import remove_job, why_not_remove_alone
from gtui.core.sched import transitions
from gtui.core.sched.engine import Engine
from gtui.ui.app import GtuiApp
from gtui.ui.screens.confirm import ConfirmScreen
from tests.conftest import write_queue
from tests.ui.test_ui_app import dashboard, select, state, toasts, until

QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "1s"

[[jobs]]
name = "prep"
gpus = 0
cmd = "exit 1"

[[jobs]]
name = "use"
gpus = 0
after = ["prep"]
cmd = "true"

[[jobs]]
name = "grid-{a}-{b}"
matrix = { a = [1, 2], b = [3, 4] }
gpus = 0
after = ["prep"]
cmd = "true"

[[jobs]]
name = "bad"
gpus = 0
cmd = "exit 1"

[[jobs]]
name = "long"
gpus = 0
cmd = "sleep 60"
"""


def why_not_pause(rec: JobRecord) -> str | None:
    return transitions.why_not_switch(rec, transitions.PAUSE)


def file_rule(engine: Engine, name: str) -> str | None:
    refused = why_not_remove_alone([v.spec for v in engine.jobs()], engine.view(name).spec)
    return refused[1] if refused is not None else None


# (the job, the key, the core's rule that refuses it there)
SINGLE = [
    ("bad", "p", lambda e, n: why_not_pause(e.view(n).record)),
    ("bad", "x", lambda e, n: transitions.why_not_kill(e.view(n).record)),
    ("long", "r", lambda e, n: transitions.why_not_retry(e.view(n).record)),
    ("long", "e", lambda e, n: transitions.why_not_edit(e.view(n).record)),
    ("long", "K", lambda e, n: transitions.why_not_move(e.view(n).record)),
    ("long", "d", lambda e, n: transitions.why_not_remove(e.view(n).record)),
    ("prep", "d", file_rule),  # jobs wait for it
    ("grid-1-3", "d", file_rule),  # one combination of a matrix with several keys
]

# (the marked jobs, the key, the core's rule): the reason is the first marked job's, as the
# core's own check of all of them at once says it
MARKED = [
    (["prep", "bad"], "x", lambda e, n: transitions.why_not_kill(e.view(n).record)),
    (["prep", "bad"], "K", lambda e, n: transitions.why_not_move(e.view(n).record)),
    (["prep", "bad"], "p", lambda e, n: why_not_pause(e.view(n).record)),
    (["long"], "r", lambda e, n: transitions.why_not_retry(e.view(n).record)),
]


def shows_exactly(app: GtuiApp, why: str) -> bool:
    """A warning toast whose whole text is ``why`` (toasts are read with whitespace folded)."""
    return ("warning", " ".join(why.split())) in toasts(app)


@pytest.fixture
def queue(tmp_path: Path) -> Path:
    return write_queue(tmp_path, QUEUE)


async def settled(pilot: object, engine: Engine) -> None:
    await until(
        pilot,  # type: ignore[arg-type]
        lambda: (
            state(engine, "long") == JobState.RUNNING
            and state(engine, "bad") == JobState.FAILED
            and state(engine, "use") == JobState.BLOCKED
            and state(engine, "grid-1-3") == JobState.BLOCKED
        ),
        what="long running, bad failed, use and the grid blocked",
    )


async def test_a_refused_key_shows_the_cores_reason_word_for_word(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await settled(pilot, engine)
        for name, key, rule in SINGLE:
            why = rule(engine, name)
            assert why is not None, (name, key)
            await select(pilot, app, name)
            app.clear_notifications()
            await pilot.press(key)
            await until(pilot, lambda w=why: shows_exactly(app, w), what=f"{key} on {name}: {why}")
            assert not isinstance(app.screen, ConfirmScreen), (name, key)  # said, not asked


async def test_a_key_on_marked_jobs_none_of_which_it_applies_to_shows_the_cores_reason(
    queue: Path,
) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await settled(pilot, engine)
        for names, key, rule in MARKED:
            for name in names:
                await select(pilot, app, name)
                await pilot.press("space")
            await until(pilot, lambda n=names: app.main.table.marked_names == n, what="marks")
            why = rule(engine, names[0])
            assert why is not None, (names, key)
            app.clear_notifications()
            await pilot.press(key)
            await until(pilot, lambda w=why: shows_exactly(app, w), what=f"{key}: {why}")
            assert not isinstance(app.screen, ConfirmScreen), (names, key)
            await pilot.press("escape")  # unmarks
            await until(pilot, lambda: not app.main.table.marked_names, what="unmarked")


@pytest.mark.parametrize("name", ["prep", "grid-1-3"])
def test_the_dashboards_removal_rule_is_the_file_rewrites_own(queue: Path, name: str) -> None:
    """What ``d`` says before its dialog is what the rewrite of the file would refuse with."""
    jobs = load_queue(queue).jobs
    refused = why_not_remove_alone(jobs, next(j for j in jobs if j.name == name))
    assert refused is not None
    with pytest.raises(QueueFileError) as e:
        remove_job(queue, name)
    assert (e.value.key, e.value.detail) == refused
