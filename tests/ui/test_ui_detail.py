"""The dashboard as a person uses it: the job detail view (enter / esc), failures read at 80x24,
the zoomed log (z), the log in $PAGER (o), search in the log (/ n N), jumps (g G home end), and
a tqdm bar's 64 KB of redraws. Pilot over a real Engine, real processes, fake GPUs; every wait
is on a condition."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text

from gtui.core.model import JobState
from gtui.core.state.status import job_dict
from gtui.core.units import format_mib
from gtui.ui.app import GtuiApp
from gtui.ui.detail import gtui_env, how_it_ended, when
from gtui.ui.format import display_path, kind_label
from gtui.ui.keys import DETAIL_KEYS, LOG_KEYS
from gtui.ui.screens.detail import DetailScreen
from gtui.ui.screens.help import HelpScreen
from gtui.ui.screens.main import MainScreen
from gtui.ui.widgets.diagnosis import DiagnosisPanel
from gtui.ui.widgets.log_search import LogSearch
from gtui.ui.widgets.log_view import CURRENT_MATCH_STYLE, MATCH_STYLE, LogView
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, screen_text, select, shows_toast, state
from tests.waiting import pilot_until as until

OOM = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 1.20 GiB is free. Including non-PyTorch memory, this process has 78.00 GiB in use."
)
TRACEBACK = (
    "import sys\\n"
    "def forward(batch):\\n"
    f"    raise RuntimeError('{OOM}')\\n"
    "def train_one_epoch_with_a_rather_long_function_name_for_the_frames(step):\\n"
    "    forward(step)\\n"
    "train_one_epoch_with_a_rather_long_function_name_for_the_frames(1)\\n"
)

QUEUE = f"""
[settings]
poll = "0.2s"
kill_grace = "1s"
env = {{ SHARED_VAR = "all-jobs" }}

[[jobs]]
name = "prep"
gpus = 0
cmd = "echo prep done"

[[jobs]]
name = "train"
gpus = 1
mem = "10G"
retries = 1
after = ["prep"]
cwd = "work"
env = {{ LR = "0.1" }}
cmd = "echo attempt {{attempt}} on gpu {{gpu}}; {sys.executable} -c \\"{TRACEBACK}\\""

[[jobs]]
name = "report"
gpus = 0
after = ["train"]
cmd = "echo report"

[[jobs]]
name = "long"
gpus = 1
mem = "5G"
cmd = "echo started; sleep 60"
"""


@pytest.fixture
def queue(queue: Path) -> Path:
    """The shared queue, with the work folder its jobs run in."""
    (queue.parent / "work").mkdir()
    return queue


_FRAME = re.compile(r"[│╭╮╰╯─\u2580-\u259f]")  # borders, and the block glyphs of scrollbars


def flat(text: str) -> str:
    """Screen text as one line of words: borders and scrollbars gone, wrapped lines joined."""
    return " ".join(_FRAME.sub(" ", text).split())


def detail(app: GtuiApp) -> DetailScreen:
    screen = app.screen
    assert isinstance(screen, DetailScreen), screen
    return screen


def detail_shown(app: GtuiApp, name: str, *texts: str) -> bool:
    """The detail view of ``name`` is on screen and says each of ``texts``."""
    screen = app.screen
    if not isinstance(screen, DetailScreen) or screen.job != name:
        return False
    shown = flat(screen_text(app))
    return all(flat(t) in shown for t in texts)


async def open_detail(pilot, app: GtuiApp, name: str, *texts: str) -> None:  # type: ignore[no-untyped-def]
    await select(pilot, app, name)
    await pilot.press("enter")
    await until(pilot, lambda: detail_shown(app, name, *texts), what=f"{name}'s details")


async def failed_twice(pilot, engine) -> None:  # type: ignore[no-untyped-def]
    await until(
        pilot,
        lambda: (
            state(engine, "train") == JobState.FAILED and engine.view("train").record.attempt == 2
        ),
        timeout=30,
        what="train failed twice",
    )


# -- the detail view ---------------------------------------------------------------------------


async def test_enter_opens_the_job_detail_and_esc_goes_back(queue: Path) -> None:
    async with dashboard(queue, size=(120, 150)) as (app, pilot, engine):
        await failed_twice(pilot, engine)
        rec = engine.view("train").record
        gpu = rec.gpus[0]
        await open_detail(pilot, app, "train", "attempts")
        shown = flat(screen_text(app))
        # The command after its placeholders, and as the file has it.
        assert f"echo attempt 2 on gpu {gpu};" in shown
        assert "echo attempt {attempt} on gpu {gpu};" in shown
        assert f"cwd {display_path(queue.parent / 'work')}" in shown
        # GPUs and memory asked and given; the retry after the OOM asks more.
        assert f"gpus asked 1 · last given GPU {gpu}" in shown
        assert "memory asked 10G per GPU · now asks" in shown and "grown after a CUDA OOM" in shown
        # Every attempt: when, how it ended, the diagnosis, the peak, the GPU, the log.
        one = r"#1 \S+ \S+ → \S+ \(0:0\d\) exit 1 · retried( · peak \S+)? · GPU \d · train.1.log"
        two = r"#2 \S+ \S+ → \S+ \(0:0\d\) exit 1( · peak \S+)? · GPU \d · train.2.log"
        assert re.search(one, shown) and re.search(two, shown), shown
        assert shown.count(f"CUDA OOM: RuntimeError: {OOM}") == 3  # the last, and each attempt
        # The diagnosis and its hint, whole.
        assert f"diagnosis CUDA OOM: RuntimeError: {OOM} hint It asked" in shown
        # Who it waits for, who waits for it.
        assert "after prep (✓ done)" in shown
        assert "waited on by report (⊘ blocked)" in shown
        # The environment gtui set, on top of the user's.
        for pair in ("SHARED_VAR all-jobs", "LR 0.1", "GTUI_JOB train", "GTUI_ATTEMPT 2"):
            assert pair in shown
        assert f"CUDA_VISIBLE_DEVICES {gpu}" in shown and "PYTHONUNBUFFERED 1" in shown
        # The log below, of the last attempt.
        log = detail(app).log_view
        await until(pilot, lambda: "attempt 2 on gpu" in log.text().plain, what="its log")
        assert str(log.border_title) == "Log · train · attempt 2"
        # tab moves between the details and the log; each scrolls with the keys.
        box = detail(app).query_one("#detail-box")
        assert app.focused is box
        await pilot.press("tab")
        await until(pilot, lambda: app.focused is log, what="the log focused")
        await pilot.press("tab")
        await until(pilot, lambda: app.focused is box, what="the details focused")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), what="back to the queue")
        assert app.focused is app.main.table and app.main.table.selected == "train"


async def test_the_detail_view_shows_everything_gtui_status_knows(queue: Path) -> None:
    """Each field of ``gtui status --json`` for a job, as the detail view writes it."""
    async with dashboard(queue, size=(120, 150)) as (app, pilot, engine):
        await failed_twice(pilot, engine)
        await until(pilot, lambda: state(engine, "report") == JobState.BLOCKED)
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        for name in ("train", "report", "long", "prep"):
            view = engine.view(name)
            doc = job_dict(view)
            await open_detail(pilot, app, name, "environment")
            shown = flat(screen_text(app))
            rec = view.record
            expected = [doc["name"], doc["state"]]
            if doc["attempt"]:
                expected.append(f"attempt {doc['attempt']}")
                expected.append(f"started {when(doc['started_at'])}")
                expected.append(f"log {display_path(Path(doc['log']))}")
            if doc["ended_at"] is not None:
                expected.append(f"ended {when(doc['ended_at'], doc['started_at'])}")
            if doc["exit_code"] is not None and not rec.active:
                expected.append(f") · {how_it_ended(doc['exit_code'], doc['signal'])}")
            if doc["gpus"] and not rec.active:
                expected.append(f"last given GPU {','.join(map(str, doc['gpus']))}")
            if doc["gpus"] and rec.active:
                expected.append(f"given GPU {','.join(map(str, doc['gpus']))}")
            if doc["mem_mib"] is not None:
                expected.append(format_mib(doc["mem_mib"]))
            if doc["reason"]:
                expected.append(doc["reason"])
            if doc["reason_at"] is not None:
                expected.append(f"said at {when(doc['reason_at'], doc['reason_at'])}")
            if doc["diagnosis"]:
                d = doc["diagnosis"]
                expected += [kind_label(d["kind"]), d["line"], d["hint"]]
            expected += doc["warnings"]
            missing = [e for e in expected if flat(e) not in shown]
            assert not missing, (name, missing, shown)
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, MainScreen))


async def test_the_environment_shown_is_the_one_the_engine_sets(queue: Path) -> None:
    async with dashboard(queue) as (_app, pilot, engine):
        await failed_twice(pilot, engine)
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        for name in ("train", "prep", "long"):
            view = engine.view(name)
            rec = view.record
            ran = engine.parts.runner.job_env(view.spec, rec, rec.gpus)
            assert gtui_env(view.spec, rec, engine.settings, engine.queue_path) == ran, name


async def test_the_detail_view_follows_the_job_as_it_changes(queue: Path) -> None:
    async with dashboard(queue, size=(120, 60)) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        await open_detail(pilot, app, "long", "running for", "▶ running")
        log = detail(app).log_view
        await until(pilot, lambda: "started" in log.text().plain, what="its log")
        await engine.kill(["long"])
        await until(
            pilot,
            lambda: detail_shown(app, "long", "✕ killed", "#1", "killed by you"),
            what="the kill, shown in place",
        )


async def test_the_detail_view_of_a_job_that_never_ran_says_what_it_will_get(
    queue: Path,
) -> None:
    async with dashboard(queue, size=(120, 60)) as (app, pilot, engine):
        await failed_twice(pilot, engine)
        await open_detail(pilot, app, "report", "⊘ blocked", "not started yet")
        shown = flat(screen_text(app))
        assert "blocked after train (failed)" in shown
        assert "environment when it starts" in shown
        assert 'CUDA_VISIBLE_DEVICES "" (empty: it sees no GPU)' in shown
        assert "no log yet: the job has not started" in shown


# -- failures readable at 80x24: wrapped, zoomed -------------------------------------------


async def test_at_80x24_the_diagnosis_and_the_tracebacks_last_frames_wrap_not_clip(
    queue: Path,
) -> None:
    async with dashboard(queue, size=(80, 24)) as (app, pilot, engine):
        await failed_twice(pilot, engine)
        await select(pilot, app, "train")
        diagnosis = app.main.query_one(DiagnosisPanel)
        await until(pilot, lambda: diagnosis.display, what="the diagnosis")
        # Nothing is cut at the right edge: the whole message, wrapped over lines. Waited for
        # on the screen: the panel shows a refresh before the compositor paints it (a busy
        # machine read the screen in between); a clipped message never shows and times out.
        await until(
            pilot,
            lambda: f"RuntimeError: {OOM}" in flat(screen_text(app)),
            what="the whole diagnosis on screen",
        )
        # z: the log alone; the traceback's last frames, whole, without scrolling sideways.
        await pilot.press("z")
        log = app.main.log_view
        await until(pilot, lambda: log.region.width == 80 and app.focused is log, what="zoom")
        shown = screen_text(app)
        assert "train_one_epoch_with_a_rather_long_function_name_for_the_frames" in shown
        assert 'File "<string>", line 3, in forward' in shown
        assert f"RuntimeError: {OOM}" in flat(shown)


async def test_z_zooms_the_log_to_the_whole_screen_and_back(queue: Path) -> None:
    async with dashboard(queue, size=(80, 24)) as (app, pilot, engine):
        await failed_twice(pilot, engine)
        await select(pilot, app, "train")
        main = app.main
        log, diagnosis = main.log_view, main.query_one(DiagnosisPanel)
        queue_box = main.query_one("#queue-box")
        footer = " ".join(screen_text(app).splitlines()[-2:])
        assert "z Zoom" in footer
        await pilot.press("z")
        await until(pilot, lambda: main.zoomed and not queue_box.display, what="zoomed")
        await until(pilot, lambda: log.region.height >= 24 - 2 - 2, what="the log, full height")
        assert not diagnosis.display and app.focused is log
        assert "z Zoom" in " ".join(screen_text(app).splitlines()[-2:])  # the footer stays
        assert "Queue ·" not in screen_text(app) and "GPUs" not in screen_text(app)
        await pilot.press("z")
        await until(pilot, lambda: not main.zoomed and queue_box.display, what="back")
        await until(pilot, lambda: diagnosis.display and app.focused is main.table)
        # esc leaves the zoom too.
        await pilot.press("z")
        await until(pilot, lambda: main.zoomed)
        await pilot.press("escape")
        await until(pilot, lambda: not main.zoomed and app.focused is main.table)


async def test_z_in_the_detail_view_zooms_its_log(queue: Path) -> None:
    async with dashboard(queue, size=(80, 24)) as (app, pilot, engine):
        await failed_twice(pilot, engine)
        await open_detail(pilot, app, "train", "diagnosis")
        screen = detail(app)
        box = screen.query_one("#detail-box")
        await pilot.press("z")
        await until(pilot, lambda: screen.zoomed and not box.display, what="zoomed")
        await until(pilot, lambda: f"RuntimeError: {OOM}" in flat(screen_text(app)))
        # The footer redraws its keys on its own turn, after the log: under load it can lag
        # the log's text by a frame or more, so wait for it as for the text.
        await until(pilot, lambda: "z Unzoom" in screen_text(app), what="the footer's z Unzoom")
        await pilot.press("escape")  # unzooms first
        await until(pilot, lambda: not screen.zoomed and box.display)
        assert app.screen is screen
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))


# -- o: the whole log in $PAGER ---------------------------------------------------------------


@contextlib.contextmanager
def _no_suspend(self: GtuiApp) -> Iterator[None]:
    yield  # the headless test driver cannot suspend; a terminal's does (tests/core/test_tmux.py)


async def test_o_opens_the_whole_log_in_the_pager_and_the_queue_goes_on_meanwhile(
    queue: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen, go = tmp_path / "paged.txt", tmp_path / "go"
    # A pager that copies what it was given, then waits until the test lets it go.
    monkeypatch.setenv(
        "PAGER", f"sh -c 'cp \"$0\" {seen}; while [ ! -e {go} ]; do sleep 0.05; done'"
    )
    monkeypatch.setattr(GtuiApp, "suspend", _no_suspend)
    async with dashboard(queue) as (app, pilot, engine):
        await failed_twice(pilot, engine)
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        await select(pilot, app, "train")
        await pilot.press("o")
        await until(pilot, seen.exists, what="the pager")
        log = Path(str(engine.view("train").record.log))
        await until(pilot, lambda: seen.read_bytes() == log.read_bytes(), what="the whole log")
        # While the pager is open, the scheduler in this process goes on.
        await engine.kill(["long"])
        await until(pilot, lambda: state(engine, "long") == JobState.KILLED)
        go.touch()
        await until(
            pilot, lambda: not [w for w in app.workers if w.group == "pager" and not w.is_finished]
        )
        await pilot.press("down")
        await until(pilot, lambda: app.main.table.selected == "report", what="keys work again")


async def test_o_says_so_when_the_screen_cannot_be_handed_over(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "prep") == JobState.DONE)
        await select(pilot, app, "prep")
        await pilot.press("o")
        await until(pilot, lambda: shows_toast(app, "warning", "cannot hand the screen"))


GATED = """
[settings]
poll = "0.2s"

[[jobs]]
name = "gate"
gpus = 0
cmd = "while [ ! -e go ]; do sleep 0.05; done"

[[jobs]]
name = "gated"
gpus = 0
after = ["gate"]
cmd = "echo gated ran"
"""


async def test_o_opens_the_log_a_job_has_now_even_before_the_pane_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Selected while it waited, a job has no log; it then runs and ends while the side pane
    has not caught up yet (under load its update comes after the key). ``o`` pages the job's
    log as the engine has it now: it used to take the pane's stale "no log" and said "no log to
    open yet"."""
    from gtui.ui.rooms.log_pane import LogPane

    queue = write_queue(tmp_path, GATED)
    async with dashboard(queue) as (app, pilot, engine):
        await select(pilot, app, "gated")
        assert state(engine, "gated") == JobState.QUEUED and app.main.log_view.path is None
        monkeypatch.setattr(LogPane, "show_selected", lambda self: None)  # the pane stays behind
        (tmp_path / "go").touch()
        await until(pilot, lambda: state(engine, "gated") == JobState.DONE, what="gated done")
        assert app.main.log_view.path is None  # the pane still shows "no log yet"
        await pilot.press("o")
        # Headless, the pager cannot have the screen: that it tried says it had the log.
        await until(pilot, lambda: shows_toast(app, "warning", "cannot hand the screen"))
        assert not shows_toast(app, "warning", "no log to open yet")


# -- search in the log, and jumps ---------------------------------------------------------------

SEARCH_QUEUE = """
[settings]
poll = "0.2s"

[[jobs]]
name = "chatty"
gpus = 0
cmd = "for i in $(seq 0 2999); do case $i in 1500|2500) echo \\"step $i WARNING loss spike\\";; *) echo \\"step $i ok\\";; esac; done"
"""


def _styles_of(log: LogView, word: str) -> list[object]:
    """The styles the shown rows give to ``word``."""
    out = []
    rows: list[Text] = log._display_rows()
    for row in rows:
        for span in row.spans:
            if row.plain[span.start : span.end].lower() == word.lower():
                out.append(span.style)
    return out


async def test_slash_searches_the_focused_log_n_and_N_move_and_the_table_keeps_the_filter(
    tmp_path: Path,
) -> None:
    q = write_queue(tmp_path, SEARCH_QUEUE)
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "chatty") == JobState.DONE)
        await select(pilot, app, "chatty")
        log = app.main.log_view
        await until(pilot, lambda: "step 2999 ok" in log.text().plain)
        # From the table, / filters the queue.
        await pilot.press("slash")
        await until(pilot, lambda: app.main.query_one("#filter-bar").has_focus)
        await pilot.press("escape")
        await until(pilot, lambda: app.focused is app.main.table)
        # In the log, / searches it (the footer says so).
        await pilot.press("l")
        await until(pilot, lambda: app.focused is log)
        await until(pilot, lambda: "/ Search" in screen_text(app), what="the footer's / Search")
        await pilot.press("slash")
        search = app.main.query_one(LogSearch)
        await until(pilot, lambda: app.focused is search and search.display)
        await pilot.press(*"warning", "enter")
        # Following, the search finds the latest match first.
        await until(pilot, lambda: log.match is not None and "2500" in log.match.text)
        assert app.focused is log and not search.display and not log.follow
        assert "step 2500 WARNING loss spike" in screen_text(app)
        assert CURRENT_MATCH_STYLE in _styles_of(log, "warning")
        assert "/warning" in str(log.border_subtitle)
        await pilot.press("N")
        await until(pilot, lambda: log.match is not None and "1500" in log.match.text)
        # the match is found before the panel has read and painted its lines
        await until(pilot, lambda: "step 1500 WARNING loss spike" in screen_text(app))
        await pilot.press("N")
        await until(pilot, lambda: shows_toast(app, "information", "no more match", "above"))
        assert log.match is not None and "1500" in log.match.text
        await pilot.press("n")
        await until(pilot, lambda: log.match is not None and "2500" in log.match.text)
        # Every match on screen is highlighted: scroll both into one window.
        await pilot.press("g")
        await until(pilot, lambda: log.text().plain.startswith("step 0 ok"), what="g: the top")
        assert log.position == 0.0
        await pilot.press("G")
        await until(pilot, lambda: log.follow and "step 2999 ok" in log.text().plain, what="G")
        await pilot.press("home")
        await until(pilot, lambda: log.text().plain.startswith("step 0 ok"), what="home")
        await pilot.press("end")
        await until(pilot, lambda: log.follow, what="end")
        await pilot.press("escape")
        await until(pilot, lambda: app.focused is app.main.table)
        await pilot.press("slash")
        await until(pilot, lambda: app.main.query_one("#filter-bar").has_focus)


async def test_search_highlights_every_match_on_screen(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "few"
        gpus = 0
        cmd = "echo one error; echo fine; echo two Error here; echo three ERROR"
        """,
    )
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "few") == JobState.DONE)
        await select(pilot, app, "few")
        log = app.main.log_view
        await until(pilot, lambda: "three ERROR" in log.text().plain)
        await pilot.press("l", "slash")
        await until(pilot, lambda: isinstance(app.focused, LogSearch), what="the search line")
        await pilot.press(*"error", "enter")
        await until(pilot, lambda: log.match is not None and log.match.text == "three ERROR")
        # Painted on a later refresh (the match, then the current one, 2 lines above):
        await until(pilot, lambda: _styles_of(log, "error") == [MATCH_STYLE, CURRENT_MATCH_STYLE])
        await until(pilot, lambda: app.focused is log, what="the log focused again")
        await pilot.press("g")  # the top: every line on screen, every match highlighted
        await until(pilot, lambda: log.text().plain.startswith("one error"))
        await until(
            pilot,
            lambda: (
                sorted(map(str, _styles_of(log, "error")))
                == sorted(map(str, [MATCH_STYLE, MATCH_STYLE, CURRENT_MATCH_STYLE]))
            ),
            what="every match highlighted",
        )


async def test_search_in_the_detail_view(tmp_path: Path) -> None:
    q = write_queue(tmp_path, SEARCH_QUEUE)
    async with dashboard(q, size=(80, 24)) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "chatty") == JobState.DONE)
        await open_detail(pilot, app, "chatty", "done")
        log = detail(app).log_view
        await until(pilot, lambda: "step 2999 ok" in log.text().plain)
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.focused, LogSearch), what="the search line")
        # Letters that are keys of this screen (o, n, f, z) go into the search line.
        await pilot.press(*"fz on loss spike")
        search = detail(app).query_one(LogSearch)
        assert search.value == "fz on loss spike" and not detail(app).zoomed
        await pilot.press("home", *["delete"] * len("fz on "))
        await until(pilot, lambda: search.value == "loss spike")
        await pilot.press("enter")
        await until(pilot, lambda: log.match is not None and "2500" in log.match.text)
        await pilot.press("N")
        await until(pilot, lambda: log.match is not None and "1500" in log.match.text)
        # the match is found before the panel has read and painted its lines
        await until(pilot, lambda: "step 1500 WARNING loss spike" in screen_text(app))


# -- the keys are written down -------------------------------------------------------------------


async def test_the_help_screen_lists_the_log_and_detail_keys(queue: Path) -> None:
    async with dashboard(queue, size=(120, 90)) as (app, pilot, _):
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))

        def missing() -> list[str]:
            text = flat(screen_text(app))
            want = [f"{k} {w[:30]}" for k, w in LOG_KEYS]
            want += [f"{k.shown} {k.help[:30]}" for k in DETAIL_KEYS]
            want += [
                "enter open the selected job's details",
                "z zoom the log",
                "o open the whole log",
            ]
            want += ["home end g G the first / last job, or the top / end of the focused log"]
            return [w for w in want if flat(w) not in text]

        try:
            await until(pilot, lambda: not missing())
        except AssertionError:
            raise AssertionError(f"missing from the help: {missing()}") from None


async def test_the_detail_footer_shows_its_keys_at_80_columns(queue: Path) -> None:
    async with dashboard(queue, size=(80, 24)) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "prep") == JobState.DONE)
        await open_detail(pilot, app, "prep", "done")

        def missing() -> list[str]:
            footer = " ".join(screen_text(app).splitlines()[-2:])
            return [k.shown for k in DETAIL_KEYS if f"{k.shown} {k.label}" not in footer]

        # The footer is painted a frame after the screen opens: wait for it, then check.
        await until(pilot, lambda: not missing(), what="every detail key in the footer")


# -- a tqdm bar's redraws ---------------------------------------------------------------------


async def test_a_64_kb_run_of_tqdm_redraws_shows_only_the_latest_state(tmp_path: Path) -> None:
    script = tmp_path / "bar.py"
    script.write_text(
        "import sys, time\n"
        "print('epoch 1', flush=True)\n"
        "n = 1100\n"
        "for i in range(n):\n"
        "    sys.stdout.write(f'\\r{i * 100 // (n - 1):3d}%|{\"#\" * (i * 40 // (n - 1)):<40}| {i}/{n - 1} [it/s]')\n"
        "sys.stdout.flush()\n"
        "time.sleep(60)\n"
    )
    q = write_queue(
        tmp_path,
        f"""
        [[jobs]]
        name = "bar"
        gpus = 0
        cmd = "{sys.executable} {script}"
        """,
    )
    last = f"100%|{'#' * 40}| 1099/1099 [it/s]"
    async with dashboard(q, size=(200, 40)) as (app, pilot, engine):  # the bar fits a row
        await until(pilot, lambda: state(engine, "bar") == JobState.RUNNING)
        log_file = Path(str(engine.view("bar").record.log))
        await until(pilot, lambda: log_file.stat().st_size > 64 * 1024, what="64 KB of redraws")
        await select(pilot, app, "bar")
        log = app.main.log_view
        await until(pilot, lambda: last in log.text().plain, what="the bar's last state")
        assert log.text().plain.splitlines() == ["epoch 1", last]
        await pilot.press("z")  # zoomed, scrolled: still only the latest state
        await until(pilot, lambda: app.main.zoomed)
        await pilot.press("l", "g")
        await until(pilot, lambda: not log.follow)
        assert log.text().plain.splitlines() == ["epoch 1", last]
        await open_detail(pilot, app, "bar", "running")
        dlog = detail(app).log_view
        await until(pilot, lambda: dlog.text().plain.splitlines() == ["epoch 1", last])


# -- a dashboard attached to a scheduler elsewhere ----------------------------------------------

REMOTE_QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "1s"

[[jobs]]
name = "long"
cmd = "sleep 120"
gpus = 1
mem = "10G"

[[jobs]]
name = "flaky"
gpus = 0
retries = 1
cmd = "echo 'ModuleNotFoundError: No module named foo'; exit 1"
"""


async def test_attached_over_the_socket_the_detail_view_reads_the_attempts_from_the_db(
    tmp_path: Path,
) -> None:
    from gtui.core.control.remote import RemoteEngine
    from tests.core.control.test_remote_dashboard import Scheduler, kill_jobs

    q = write_queue(tmp_path, REMOTE_QUEUE)
    sched = Scheduler(q)  # a headless `gtui run` in another process
    remote = RemoteEngine(q)
    app = GtuiApp(remote, host="testhost")
    try:
        async with app.run_test(size=(120, 60), notifications=True) as pilot:
            await until(pilot, lambda: app.main.ready and len(app.main.table) == 2)
            await until(
                pilot,
                lambda: (
                    remote.view("flaky").record.state == JobState.FAILED
                    and remote.view("flaky").record.attempt == 2
                ),
                timeout=30,
            )
            await open_detail(pilot, app, "flaky", "#1", "#2", "retried", "ModuleNotFoundError")
            assert len(detail(app).history) == 2
            log = detail(app).log_view
            await until(pilot, lambda: "No module named foo" in log.text().plain)
    finally:
        await remote.shutdown()
        sched.stop()
        kill_jobs(q)
