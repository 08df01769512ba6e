"""The dashboard for a whole day's work. Names that stay distinguishable, waiting
reasons that lead with their key part, a filter that does not trap, honest screens, bulk
actions. Pilot over a real Engine, real processes and files; only the GPUs are fake.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pytest

from gtui.core.model import JobState
from gtui.core.sched.eta import Estimate
from gtui.ui.format import cut_middle, reason_key
from gtui.ui.screens.confirm import ConfirmScreen
from gtui.ui.screens.job_form import JobForm
from tests.conftest import REPO, gtui, write_queue
from tests.dashboard_helpers import dashboard, screen_text, shows_toast, state, type_text
from tests.waiting import pilot_until as until

# -- names cut in the middle ----------------------------------------------------------------------

SWEEP = [f"train-vit-base-patch16-224-lr{lr}-seed{s}" for lr in ("0.1", "0.01") for s in (1, 3)]


def test_long_names_are_cut_in_the_middle_and_sweep_members_stay_distinct() -> None:
    cut = [cut_middle(n, 24) for n in SWEEP]
    assert all(len(c) == 24 for c in cut), cut
    assert len(set(cut)) == len(SWEEP), cut  # every member differs on screen
    assert cut_middle("train-vit-base-patch16-224-lr0.01-seed3", 24) == "train-vit-…-lr0.01-seed3"
    for c, n in zip(cut, SWEEP, strict=True):
        assert "…" in c and n.startswith(c.split("…")[0]) and n.endswith(c.split("…")[1])
    assert cut_middle("short", 24) == "short"
    assert cut_middle("abcdefghij", 5) == "ab…ij"


def test_the_waiting_reason_leads_with_its_key_part() -> None:
    full = "needs 1 GPU with 40G: none eligible (GPU0 31G < 40G, GPU1 12G < 40G, GPU2 ours)"
    assert reason_key(full) == "needs 40G, best GPU has 31G free"
    two = "needs 2 GPUs with 35G: 1 eligible (GPU1 ours, GPU2 10G < 35G, reserve 1 keeps 1)"
    assert reason_key(two) == "needs 2x35G, 1 eligible"
    assert reason_key("after prep (running)") == "after prep (running)"


QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "1s"

[[jobs]]
name = "train-vit-base-patch16-224-lr{lr}-seed{seed}"
matrix = { lr = ["0.1", "0.01"], seed = [1, 3] }
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "big"
gpus = 1
mem = "70G"
cmd = "true"
"""


def rows(app: object) -> list[str]:
    """The queue table's lines as painted."""
    table = app.main.table  # type: ignore[attr-defined]
    return ["".join(seg.text for seg in table.render_line(y)) for y in range(1, table.size.height)]


async def test_at_80_columns_sweep_members_differ_on_screen(queue: Path) -> None:
    try:
        async with dashboard(queue, size=(80, 24), fake="1x80G:40G") as (app, pilot, engine):
            names = [v.spec.name for v in engine.jobs()][:4]
            await until(pilot, lambda: all(state(engine, n) == JobState.RUNNING for n in names))
            await until(pilot, lambda: "big" in "".join(rows(app)), what="rows painted")
            shown = [r for r in rows(app) if " train" in r]
            assert len(shown) == 4
            cells = [next(w for w in r.split() if w.startswith("train")) for r in shown]
            assert len(set(cells)) == 4, shown
            assert all("…" in c for c in cells), shown  # cut in the middle
            assert sum(c.endswith("-seed3") for c in cells) == 2, shown  # the end is kept
            # At 80 columns the note has 20 cells: the key part is what fits.
            key = "needs 70G, best G"
            await until(pilot, lambda: key in "".join(rows(app)), what="big's reason, key first")
            assert "needs 1 GPU with 70G" in engine.view("big").record.reason  # the full one
    finally:
        (queue.parent / "release").touch()


# As in the demo (sample_queues/demo.toml): a 2-GPU job waits for 70G on each, beside names of
# 13 letters, so at 80 columns its note has 23 cells.
TWO_BIG = """
[settings]
poll = "0.2s"
mode = "shared"

[[jobs]]
name = "sweep-lr0.001"
gpus = 0
cmd = "true"

[[jobs]]
name = "train-vit"
gpus = 2
mem = "70G"
cmd = "true"
"""
TWO_BIG_GPUS = "80G:30G@20,80G"  # GPU0 has 50G free: "needs 2 GPUs with 70G: 1 eligible (...)"
TWO_BIG_KEY = "needs 2x70G, 1 eligible"


async def test_at_80_columns_the_reasons_key_part_comes_before_the_start_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a start estimate and no room for the progress column, the note leads with what the
    user acts on; the estimate follows only where it fits whole (the demo showed
    `starts ~4s · needs 2x7…`)."""
    queue = write_queue(tmp_path, TWO_BIG)
    async with dashboard(queue, size=(80, 24), fake=TWO_BIG_GPUS) as (app, pilot, engine):

        def starts_in_4_s(
            views: object, now: float | None = None, counts: object = None
        ) -> dict[str, Estimate]:
            return {"train-vit": Estimate(start_at=(now or time.time()) + 4)}

        monkeypatch.setattr(app.main.forecast, "update", starts_in_4_s)

        def row() -> str:
            return next((r for r in rows(app) if "train-vit" in r), "")

        await until(pilot, lambda: "train-vit" in app.main.table.estimates, what="its estimate")
        await until(pilot, lambda: TWO_BIG_KEY in row(), what=f"{TWO_BIG_KEY!r} in its row")
        assert "eligible (" in engine.view("train-vit").record.reason  # the full one is longer
        note = row().split("train-vit", 1)[1]
        assert "starts" not in note.split(TWO_BIG_KEY)[0], row()  # nothing before the key
        assert "…" not in note, row()  # nothing cut: an estimate that does not fit is left out


async def test_a_waiting_jobs_start_estimate_follows_its_reason_where_it_fits() -> None:
    from gtui.core.api import JobView
    from gtui.core.model import JobRecord, JobSpec
    from gtui.ui.widgets.job_table import PROGRESS_COLUMN_FROM, JobTable
    from tests.ui.test_ui_widgets import Harness, line_text

    table = JobTable(clock=lambda: 1000.0)
    rec = JobRecord(name="eval", reason="after prep (running)")
    async with Harness(table).run_test(size=(PROGRESS_COLUMN_FROM - 6, 5)) as pilot:
        table.set_jobs([JobView(JobSpec(name="eval", cmd="true"), rec, 0)])
        table.set_estimates({"eval": Estimate(start_at=1004.0)})
        said = "after prep (running) · starts ~4s"
        await until(pilot, lambda: said in line_text(table, 1), what=repr(said))


async def test_at_80_columns_the_queue_boxs_bottom_line_gives_the_reasons_key_part(
    tmp_path: Path,
) -> None:
    """The queue box's bottom line counts what waits and why, in the key part's words: the
    full reason (GPU by GPU) is one key away, in the job's details."""
    queue = write_queue(tmp_path, TWO_BIG)
    async with dashboard(queue, size=(80, 24), fake=TWO_BIG_GPUS) as (app, pilot, _engine):
        line = f"1 waiting: {TWO_BIG_KEY}"
        await until(pilot, lambda: line in screen_text(app), what=repr(line))
        assert "eligible (GPU0" not in screen_text(app)
        assert str(app.main.query_one("#queue-box").border_subtitle) == line


# -- the job filter ------------------------------------------------------------------------------

# poll: every change these tests make (a start, an end, a kill, a retry, an add) wakes the
# scheduler; a poll every 0.2 s only published GPU reads that repaint the screen meanwhile.
GATED = """
[settings]
poll = "1h"
kill_grace = "1s"

[[jobs]]
name = "{who}"
matrix = { who = ["beta-1", "alpha-1", "beta-2", "alpha-2"] }
gpus = 0
cmd = "echo {who}; while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "broken"
gpus = 0
cmd = "exit 3"
"""


@pytest.fixture
def gated(tmp_path: Path) -> Path:
    return write_queue(tmp_path, GATED)


def bar_text(app: object) -> str:
    return str(app.main.query_one("#filter-bar").value)  # type: ignore[attr-defined]


async def test_filter_as_you_type_enter_then_x_kills_the_job_shown(gated: Path) -> None:
    try:
        async with dashboard(gated) as (app, pilot, engine):
            four = ["beta-1", "alpha-1", "beta-2", "alpha-2"]
            await until(pilot, lambda: all(state(engine, n) == JobState.RUNNING for n in four))
            table = app.main.table
            await until(pilot, lambda: table.select("beta-2"), what="beta-2 selected")
            await pilot.press("slash")
            await until(pilot, lambda: app.main.query_one("#filter-bar").has_focus)
            await pilot.press("a", "l")
            # As you type: the table follows before any enter.
            await until(pilot, lambda: table.visible_names == ["alpha-1", "alpha-2"])
            await pilot.press("p")  # a letter of the filter, not the pause key
            await until(pilot, lambda: bar_text(app) == "alp")
            assert state(engine, "beta-2") == JobState.RUNNING
            await pilot.press("enter")
            await until(pilot, lambda: table.has_focus, what="enter: the table has the focus")
            assert table.selected == "alpha-1"  # the cursor on the first match
            text = screen_text(app)
            assert "› ▶ alpha-1" in text, text  # and that is what the screen shows
            assert "alp" in text and "2 of 5 jobs" in text, text  # the filter stays visible
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "Kill alpha-1?" in screen_text(app)
            await pilot.press("y")
            await until(pilot, lambda: state(engine, "alpha-1") == JobState.KILLED)
            assert all(
                state(engine, n) == JobState.RUNNING for n in ("beta-1", "beta-2", "alpha-2")
            )
            # Esc clears it: every job again, the cursor where it was.
            await until(pilot, lambda: isinstance(app.screen, type(app.main)))
            await pilot.press("escape")
            await until(pilot, lambda: len(table.visible_names) == 5, what="the filter cleared")
            assert table.selected == "alpha-1" and bar_text(app) == ""
            assert "alp" not in str(app.main.query_one("#queue-box").border_title)
    finally:
        (gated.parent / "release").touch()


async def test_esc_in_the_filter_clears_it_and_a_state_word_filters_by_state(gated: Path) -> None:
    try:
        async with dashboard(gated) as (app, pilot, engine):
            await until(pilot, lambda: state(engine, "broken") == JobState.FAILED)
            table = app.main.table
            await until(pilot, lambda: table.view("broken").record.state == JobState.FAILED)
            await pilot.press("slash", *"@failed")
            await until(pilot, lambda: table.visible_names == ["broken"])
            await pilot.press("escape")
            await until(pilot, lambda: len(table.visible_names) == 5 and table.has_focus)
            assert not app.main.query_one("#filter-line").display
            await pilot.press("slash", *"beta", "enter")
            await until(pilot, lambda: table.visible_names == ["beta-1", "beta-2"])
            await until(pilot, lambda: table.has_focus)
            await pilot.press("slash")  # back to the filter, its text kept to edit
            await until(pilot, lambda: app.main.query_one("#filter-bar").has_focus)
            assert bar_text(app) == "beta"
            await pilot.press("backspace", "backspace", "backspace", "backspace", *"zzz")
            await until(pilot, lambda: table.visible_names == [])
            await pilot.press("enter")  # nothing matches: the table is empty, x has no target
            await pilot.press("x")
            await until(pilot, lambda: shows_toast(app, "information", "no job selected"))
    finally:
        (gated.parent / "release").touch()


# -- honest screens ------------------------------------------------------------------------------


def test_held_and_suspended_jobs_have_different_marks() -> None:
    from gtui.ui.format import STATE_GLYPH

    assert STATE_GLYPH[JobState.HELD] != STATE_GLYPH[JobState.SUSPENDED]
    assert len(set(STATE_GLYPH.values())) == len(STATE_GLYPH)  # every state its own mark


# -- the add / edit form -------------------------------------------------------------------------


def test_the_forms_example_command_passes_validate_with_no_warning(tmp_path: Path) -> None:
    from gtui.ui.forms import FIELDS

    example = dict((k, p) for k, _, p in FIELDS)["cmd"]
    q = write_queue(tmp_path, f'[[jobs]]\ncmd = "{example}"\nmem = "20G"\n')
    r = gtui("validate", str(q), "--fake-gpus", "2x80G")
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr, r.stderr


async def test_enter_in_the_command_field_moves_on_and_submits_only_on_the_last(
    gated: Path,
) -> None:
    try:
        async with dashboard(gated) as (app, pilot, engine):
            before = len(engine.jobs())
            await pilot.press("a")
            await until(pilot, lambda: getattr(app.focused, "id", None) == "field-name")
            await pilot.press("enter")  # no name: derived from the command
            await until(pilot, lambda: getattr(app.focused, "id", None) == "field-cmd")
            await type_text(pilot, "echo hi")
            await pilot.press("enter")
            # Not submitted with defaults the user never saw: the next field has the cursor.
            await until(pilot, lambda: getattr(app.focused, "id", None) == "field-gpus")
            assert isinstance(app.screen, JobForm) and len(engine.jobs()) == before
            await pilot.press("0", "enter")
            await until(pilot, lambda: getattr(app.focused, "id", None) == "field-mem")
            for field in ("priority", "after", "retries", "timeout", "cwd", "env"):
                await pilot.press("enter")
                await until(pilot, lambda f=field: getattr(app.focused, "id", None) == f"field-{f}")
            assert len(engine.jobs()) == before
            await type_text(pilot, "SEED=1")
            await pilot.press("enter")  # enter on the last field submits
            await until(pilot, lambda: len(engine.jobs()) == before + 1, what="the job added")
            added = engine.jobs()[-1]
            assert (added.spec.cmd, added.spec.gpus, added.spec.env) == (
                "echo hi",
                0,
                {"SEED": "1"},
            )
            assert not isinstance(app.screen, JobForm)
    finally:
        (gated.parent / "release").touch()


# -- validation and setup messages ---------------------------------------------------------------


def test_a_matrix_key_the_command_never_uses_is_a_warning(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "train-{lr}-{seed}"
        matrix = { lr = [0.1, 0.01], seed = [1, 2] }
        gpus = 0
        cmd = "python train.py --lr {lr}"

        [[jobs]]
        name = "ok-{seed}"
        matrix = { seed = [1, 2] }
        gpus = 0
        cmd = "python eval.py"
        env = { SEED = "{seed}" }
        """,
    )
    r = gtui("validate", str(q))
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "matrix" in line]
    assert len(lines) == 1, r.stderr  # said once for the entry, not once per job
    assert f"{q}:3: matrix: `seed` is not used by cmd" in lines[0], lines
    assert "identical commands" in lines[0]
    assert "ok-" not in r.stderr  # used in env: it does make the jobs differ


def test_a_log_dir_error_names_the_resolved_path_and_log_dir(tmp_path: Path) -> None:
    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "out").write_text("a file where the log directory should go\n")
    q = write_queue(
        folder, '[settings]\nlog_dir = "out/logs"\n\n[[jobs]]\nname = "a"\ngpus = 0\ncmd = "true"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = gtui("run", str(q), cwd=elsewhere)
    assert r.returncode == 1
    failed = next(line for line in r.stdout.splitlines() if "failed a" in line)
    assert str(folder / "out" / "logs") in failed, failed  # resolved from the queue's folder
    assert str(elsewhere) not in failed
    assert "log_dir" in failed and "cwd" not in failed, failed  # the hint names the setting
    assert "(1 job: 1 queued)" in r.stdout  # and "1 jobs" is gone


def test_a_read_only_queue_folder_gets_a_hint() -> None:
    """Run as a user (nobody) who may read the queue but not write its folder."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run gtui as a user who cannot write the folder")
    top = Path(tempfile.mkdtemp(prefix="gtui-ro-", dir="/tmp"))  # /tmp: nobody can reach it
    try:
        top.chmod(0o755)
        folder = top / "shared"
        folder.mkdir(mode=0o755)
        mine = top / "mine"  # a folder nobody may write: the state and logs go there
        mine.mkdir(mode=0o777)
        mine.chmod(0o777)
        q = write_queue(
            folder,
            f'[settings]\nlog_dir = "{mine}/logs"\n\n[[jobs]]\nname = "a"\ngpus = 0\ncmd = "true"\n',
        )
        q.chmod(0o644)

        # nobody's own runtime and claims folders (the tests' are root's, private)
        skip = ("XDG_RUNTIME_DIR", "GTUI_CLAIMS_DIR", "TMPDIR")
        own = {k: v for k, v in os.environ.items() if k not in skip}
        own |= {"XDG_RUNTIME_DIR": str(mine / "run"), "GTUI_CLAIMS_DIR": str(mine / "claims")}

        def run(**env: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                 sys.executable, "-m", "gtui", "run", str(q)],
                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd="/",
                env={**own, **env},
            )  # fmt: skip

        r = run()
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert f"{folder}/.gtui" in r.stderr and "read-only for you" in r.stderr, r.stderr
        assert "GTUI_STATE_DIR" in r.stderr, r.stderr  # how to put the state elsewhere
        r = run(GTUI_STATE_DIR=str(mine / "state"))  # the hint, followed
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert "done a" in r.stdout
        assert list((mine / "state").glob("shared-*/q.db")), list((mine / "state").rglob("*"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


# -- the demo queue ------------------------------------------------------------------------------

DEMO_WITHIN_S = 30  # what docs/dashboard.md promises a newcomer


@pytest.mark.slow
def test_the_demo_shows_every_state_it_promises_within_30_s(tmp_path: Path) -> None:
    """`gtui run sample_queues/demo.toml` at its real pace, on its own fake GPUs: from the
    event log's clock (the scheduler's, not this test's), each promised state shows within
    DEMO_WITHIN_S of the start: running (GPU and CPU jobs), done, a CUDA OOM failure, blocked,
    a retry, and a job waiting for memory that then runs."""
    samples = REPO / "sample_queues"
    for name in ("demo.toml", "mock_train.py"):
        shutil.copy(samples / name, tmp_path / name)
    r = gtui("run", str(tmp_path / "demo.toml"), timeout=180)
    lines = r.stdout.splitlines()
    stamp = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] (.*)$")
    events = [
        (datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S"), m[2])
        for m in map(stamp.match, lines)
        if m is not None
    ]
    t0 = events[0][0]

    def shown(what: str, pattern: str) -> float:
        for t, text in events:
            if re.search(pattern, text):
                return (t - t0).total_seconds()
        raise AssertionError(f"the demo never showed {what}:\n{r.stdout}")

    promised = {
        "a GPU job running": r"^start train-resnet .* on GPU",
        "a CPU job running": r"^start prep-data .* on CPU",
        "a job done": r"^done ",
        "a CUDA OOM failure": r"^failed eval-ckpt7 .*cuda_oom",
        "a blocked job": r"^blocked report-ckpt7",
        "a retry": r"^retry fetch-data",
        "waiting for memory": r"waiting: .*needs 2 GPUs with 70G",
        "the waiting job running": r"^start train-vit",
    }
    late = {what: s for what, p in promised.items() if (s := shown(what, p)) > DEMO_WITHIN_S}
    assert not late, late


# -- bulk actions --------------------------------------------------------------------------------


async def test_space_and_shift_arrows_mark_jobs_and_x_r_p_t_act_on_all_of_them(
    gated: Path,
) -> None:
    try:
        async with dashboard(gated) as (app, pilot, engine):
            four = ["beta-1", "alpha-1", "beta-2", "alpha-2"]
            await until(pilot, lambda: all(state(engine, n) == JobState.RUNNING for n in four))
            table = app.main.table
            await until(pilot, lambda: table.select("alpha-1"), what="alpha-1 selected")
            await pilot.press("space")  # marks alpha-1, the cursor goes on to beta-2
            await until(pilot, lambda: table.selected == "beta-2")
            await pilot.press("down", "space")  # alpha-2 too; beta-2 left out
            await until(pilot, lambda: table.marked_names == ["alpha-1", "alpha-2"])
            assert "2 marked" in str(app.main.query_one("#queue-box").border_title)
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            text = screen_text(app)
            assert "Kill 2 jobs?" in text and "alpha-1" in text and "alpha-2" in text, text
            await pilot.press("y")
            await until(pilot, lambda: state(engine, "alpha-1") == state(engine, "alpha-2")
                        == JobState.KILLED)  # fmt: skip
            assert all(state(engine, n) == JobState.RUNNING for n in ("beta-1", "beta-2"))
            await until(pilot, lambda: table.view("alpha-2").record.state == JobState.KILLED)
            await pilot.press("r")  # retried, both
            await until(pilot, lambda: state(engine, "alpha-1") == state(engine, "alpha-2")
                        == JobState.RUNNING)  # fmt: skip
            await until(pilot, lambda: table.view("alpha-2").record.state == JobState.RUNNING)
            await pilot.press("p")  # both suspended
            await until(pilot, lambda: state(engine, "alpha-1") == state(engine, "alpha-2")
                        == JobState.SUSPENDED)  # fmt: skip
            assert state(engine, "beta-2") == JobState.RUNNING
            await pilot.press("escape")  # clears the marks
            await until(pilot, lambda: table.marked_names == [])
    finally:
        (gated.parent / "release").touch()


async def test_shift_arrows_mark_a_range_and_t_moves_all_of_it_to_the_top(tmp_path: Path) -> None:
    from tests.ui.test_ui_app import QUEUE as WAITING

    q = write_queue(tmp_path, WAITING)  # long runs; w1, w2, w3 wait for it
    async with dashboard(q) as (app, pilot, engine):
        table = app.main.table
        await until(pilot, lambda: table.select("w3"), what="w3 selected")
        await pilot.press("shift+up")  # w3 and w2 marked, the cursor on w2
        await until(pilot, lambda: table.marked_names == ["w2", "w3"])
        assert table.selected == "w2"
        await pilot.press("t")
        await until(pilot, lambda: [v.spec.name for v in engine.jobs()][:2] == ["w2", "w3"])
        assert [v.spec.name for v in engine.jobs()][2:] == ["long", "bad", "w1"]
        # down past the next waiting job (w1), both, in step: running `long` and failed `bad`
        # are passed over, not counted as a step each
        await pilot.press("J")
        want = ["long", "bad", "w1", "w2", "w3"]
        await until(pilot, lambda: [v.spec.name for v in engine.jobs()] == want)


def test_cli_verbs_take_globs_and_a_sweeps_base_name_and_count_the_matches(
    tmp_path: Path,
) -> None:
    """With no scheduler (the saved state changes): each verb says how many jobs a pattern
    matched, acts on those it applies to, and refuses a pattern that matches nothing."""
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "train-{lr}"
        matrix = { lr = ["a", "b", "c"] }
        gpus = 0
        cmd = "echo {lr}"

        [[jobs]]
        name = "other"
        gpus = 0
        cmd = "true"
        """,
    )
    r = gtui("pause", str(q), "train-*")
    assert r.returncode == 0, r.stderr
    assert "train-*: 3 jobs (train-a, train-b, train-c)" in r.stderr
    assert r.stdout.count("paused ") == 3
    r = gtui("resume", str(q), "train")  # the sweep's base name
    assert "train: 3 jobs" in r.stderr and r.stdout.count("resumed ") == 3, r
    r = gtui("kill", str(q), "train-[ab]")
    assert "train-[ab]: 2 jobs (train-a, train-b)" in r.stderr and r.stdout.count("killed") == 2
    r = gtui("retry", str(q), "train-*")
    assert "train-*: 3 jobs" in r.stderr and r.stdout.count("queued ") == 2, r  # c never ended
    assert "skipped 1 job that retry does not apply to (queued 1)" in r.stderr
    r = gtui("kill", str(q), "nope-*")
    assert r.returncode == 2 and "Traceback" not in r.stderr


async def test_d_on_a_job_that_cannot_be_removed_says_why_before_asking(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"

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
        cmd = "echo {a} {b}"
        """,
    )
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "use") == JobState.BLOCKED)
        for name, why in (
            ("prep", "prep cannot be removed: use, grid-1-3, grid-1-4 and 2 more wait for it"),
            ("grid-1-3", "one combination of a matrix with several keys"),
        ):
            await until(pilot, lambda n=name: app.main.table.select(n), what=name)
            await pilot.press("d")
            await until(pilot, lambda w=why: shows_toast(app, "warning", w), what=why)
            assert not isinstance(app.screen, ConfirmScreen)  # said before asking
        await until(pilot, lambda: app.main.table.select("use"))
        await pilot.press("d")  # this one can go: it asks
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))


async def test_a_job_that_overtakes_a_waiting_multi_gpu_job_says_why(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"
        starve_after = "15m"

        [[jobs]]
        name = "big-ddp"
        gpus = 2
        mem = "70G"
        cmd = "true"

        [[jobs]]
        name = "small"
        gpus = 1
        mem = "10G"
        cmd = "while [ ! -e release ]; do sleep 0.05; done"
        """,
    )
    try:
        async with dashboard(q, size=(200, 30), fake="80G:40G,80G") as (app, pilot, engine):
            await until(pilot, lambda: state(engine, "small") == JobState.RUNNING)
            assert state(engine, "big-ddp") == JobState.QUEUED
            said = "backfill: ahead of big-ddp (2 GPUs); kept for it after 15m"
            try:
                await until(pilot, lambda: said in "".join(rows(app)), what="small's note")
            except AssertionError:
                raise AssertionError("\n".join(rows(app))) from None
            # At 80 columns the note is cut: the details (enter) say it whole.
            await until(pilot, lambda: app.main.table.select("small"))
            await pilot.press("enter")
            await until(pilot, lambda: "ran ahead" in screen_text(app), what="the details")
            assert said in " ".join(screen_text(app).split()), screen_text(app)
    finally:
        (tmp_path / "release").touch()
