"""Widgets fed with engine values built by hand (JobView, GpusRead), in a small Textual app."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from gtui.core.api import GpusRead, JobView
from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot
from gtui.core.model import JobRecord, JobSpec, JobState, Settings
from gtui.ui.widgets.gpu_panel import GpuPanel
from gtui.ui.widgets.job_table import JobTable
from gtui.ui.widgets.log_view import LogView

G = 1024


def jv(name: str, order: int, state: JobState = JobState.QUEUED) -> JobView:
    return JobView(JobSpec(name=name, cmd="true"), JobRecord(name=name, state=state), order)


class Harness(App[None]):
    def __init__(self, widget: object) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget  # type: ignore[misc]


def line_text(table: JobTable, y: int) -> str:
    return "".join(seg.text for seg in table.render_line(y))


async def test_ten_thousand_rows_update_in_place_without_reordering() -> None:
    table = JobTable(clock=lambda: 0.0)
    async with Harness(table).run_test(size=(120, 30)) as pilot:
        table.set_jobs(jv(f"job{i:05d}", i) for i in range(10_000))
        await pilot.pause()
        assert len(table.visible_names) == 10_000
        before = table.reorders
        for i in range(0, 10_000, 7):  # a storm of state changes that keep the order
            table.update_jobs([jv(f"job{i:05d}", i, JobState.HELD)])
        assert table.reorders == before  # updated in place: no rebuild per event
        await pilot.pause()
        assert "held" in line_text(table, 1) and "job00000" in line_text(table, 1)
        assert "queued" in line_text(table, 2)
        table.update_jobs([jv("new", 10_000)])  # a new job does reorder, once
        assert table.reorders == before + 1 and table.visible_names[-1] == "new"


async def test_selection_follows_the_job_when_the_queue_is_reordered() -> None:
    table = JobTable(clock=lambda: 0.0)
    async with Harness(table).run_test(size=(100, 20)) as pilot:
        table.set_jobs([jv("a", 0), jv("b", 1), jv("c", 2)])
        await pilot.pause()
        table.focus()
        await pilot.press("down", "down")
        assert table.selected == "c"
        table.set_jobs([jv("c", 0), jv("a", 1), jv("b", 2)])
        assert table.selected == "c" and table.visible_names == ["c", "a", "b"]
        table.remove_jobs(["c"])
        assert table.selected in ("a", "b")


async def test_filter_by_state_group_and_name() -> None:
    table = JobTable(clock=lambda: 0.0)
    async with Harness(table).run_test(size=(100, 20)):
        table.set_jobs(
            [
                jv("train-a", 0, JobState.RUNNING),
                jv("train-b", 1, JobState.SUSPENDED),
                jv("eval", 2, JobState.FAILED),
                jv("prep", 3, JobState.DONE),
                jv("sweep", 4, JobState.HELD),
            ]
        )
        table.set_filter("active")
        assert table.visible_names == ["train-a", "train-b"]
        table.set_filter("running")
        assert table.visible_names == ["train-a"]
        table.set_filter("trouble")
        assert table.visible_names == ["eval"]
        table.set_filter("waiting")
        assert table.visible_names == ["sweep"]
        table.set_filter("all", "TRAIN")
        assert table.visible_names == ["train-a", "train-b"]
        # a job that stops matching leaves the filtered view
        table.update_jobs([jv("train-a", 0, JobState.DONE)])
        assert table.visible_names == ["train-a", "train-b"]
        table.set_filter("active")
        table.update_jobs([jv("train-b", 1, JobState.DONE)])
        assert table.visible_names == []


async def test_gpu_panel_shows_each_gpu_with_marks() -> None:
    settings = Settings(exclude=(2,))
    panel = GpuPanel(settings)
    snap = GpuSnapshot(
        gpus=tuple(
            GpuInfo(i, "NVIDIA A800-SXM4-80GB", f"u{i}", 80 * G, used, 10, 40)
            for i, used in enumerate((52 * G, 64 * G, 0, 0))
        ),
        taken_at=0,
        source="nvml",
    )
    read = GpusRead(snap, ours={0: ("lr0.1",)}, ours_mib={0: 36 * G}, reserved=(3,))
    async with Harness(panel).run_test(size=(130, 10)) as pilot:
        panel.set_read(read)
        await pilot.pause()
        lines = panel.render().plain.splitlines()
        assert len(lines) == 4
        assert "others 16G ours 36G" in lines[0] and "lr0.1" in lines[0]
        assert "others 64G" in lines[1]
        assert "excluded" in lines[2] and "reserved" in lines[3]
        panel.set_read(GpusRead(GpuSnapshot((), 0, "none", error="NVML is not available")))
        assert "NVML is not available" in panel.render().plain


async def test_log_view_follows_scrolls_and_pages(tmp_path: Path) -> None:
    log = tmp_path / "job.1.log"
    log.write_text("".join(f"line {i}\n" for i in range(200)))
    view = LogView()
    async with Harness(view).run_test(size=(60, 12)) as pilot:
        view.show(log)
        await pilot.pause()
        shown = view.text().plain.splitlines()
        assert shown[-1] == "line 199" and len(shown) == 12
        view.focus()
        await pilot.press("up")
        assert not view.follow and view.text().plain.splitlines()[-1] == "line 198"
        await pilot.press("home")
        assert view.text().plain.splitlines()[0] == "line 0"
        await pilot.press("pagedown")
        assert view.text().plain.splitlines()[0] == "line 11"
        with log.open("a") as f:
            f.write("line 200\n")
        view.poll()  # not following: the window stays put
        assert view.text().plain.splitlines()[0] == "line 11"
        await pilot.press("end")
        assert view.follow and view.text().plain.splitlines()[-1] == "line 200"
        assert "following" in view.status()


async def test_the_tables_counts_follow_every_change() -> None:
    """The header's counts by state are kept by the table as jobs change (counting
    100,000 jobs again after each batch was ~30 ms of it); always what a count would find."""
    from gtui.ui.format import count_states

    table = JobTable()
    async with Harness(table).run_test(size=(100, 20)):
        table.set_jobs([jv(f"j{i}", i) for i in range(5)])
        assert table.counts == count_states(table.views()) == {JobState.QUEUED: 5}
        table.update_jobs([jv("j0", 0, JobState.RUNNING), jv("j9", 9, JobState.HELD)])
        assert table.counts == count_states(table.views())
        table.update_jobs([jv("j0", 0, JobState.DONE)])
        table.remove_jobs(["j1", "j9", "nope"])
        assert table.counts == count_states(table.views()) == {JobState.QUEUED: 3, JobState.DONE: 1}
        assert table.visible_names == ["j0", "j2", "j3", "j4"]
        table.update_jobs([jv("j4", 0), jv("j0", 4, JobState.DONE)])  # moved: sorted again
        assert table.visible_names == ["j4", "j2", "j3", "j0"]


async def test_a_narrower_log_view_wraps_again_at_once_and_cuts_nothing(tmp_path: Path) -> None:
    """Made narrower, the log panel shows its lines wrapped for the new width from the first
    frame, not rows wrapped for the old one and cropped (which dropped the character at the
    edge) until its re-read comes back. The re-read is held here: the log is a FIFO by then,
    whose open() blocks like a stalled disk's."""
    from tests.ui.test_ui_slow_disk import stalled_file
    from tests.waiting import pilot_until

    words = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total"
    )
    log = tmp_path / "job.1.log"
    log.write_text(f"epoch 1\n{words}\n")
    view = LogView()
    async with Harness(view).run_test(size=(100, 12)) as pilot:
        view.show(log)
        await pilot_until(pilot, lambda: words in view.text().plain, what="the line on one row")
        with stalled_file(log) as fired:
            await pilot.resize_terminal(40, 12)
            await pilot.pause()
            width = view.content_size.width
            rows = ["".join(s.text for s in view.render_line(y)) for y in range(4)]
            assert all(len(r) == width for r in rows)
            assert "".join(rows[1:]).split() == words.split(), rows
            assert not fired.is_set()


async def test_a_log_not_read_yet_says_reading_not_empty(tmp_path: Path) -> None:
    """Until the first read of a file is in, the panel says it is reading, not "(empty log)"
    and "0 B": under load a zoomed panel showed a log with a traceback as empty. The read is
    held on a FIFO, whose open() blocks like a stalled disk's."""
    from tests.ui.test_ui_slow_disk import stalled_file
    from tests.waiting import pilot_until

    log = tmp_path / "job.1.log"
    log.write_text("epoch 1\n")
    view = LogView()
    async with Harness(view).run_test(size=(80, 12)) as pilot:
        with stalled_file(log) as fired:
            view.show(log)
            await pilot.pause()
            assert view.text().plain == "reading…"
            assert view.status() == "following · reading…"
            assert not fired.is_set()
        # released (a writer came and went): the read is in, and the FIFO held nothing
        await pilot_until(pilot, lambda: view.text().plain == "(empty log)", what="the read")
        assert view.status() == "following · 0 B"


async def test_a_key_pressed_before_a_polls_read_begins_is_not_lost(tmp_path: Path) -> None:
    """A poll starts a read (the file did not change); before that read's first step runs, a
    key asks for another (home here; under load, the zoom's new height did the same). The
    read must serve it: it used to clear the request as it began, find the size unchanged and
    stop, and the key did nothing."""
    from tests.waiting import pilot_until

    log = tmp_path / "job.1.log"
    log.write_text("".join(f"line {i:03d}\n" for i in range(200)))
    view = LogView()
    async with Harness(view).run_test(size=(80, 12)) as pilot:
        view.show(log)
        await pilot_until(pilot, lambda: "line 199" in view.text().plain, what="the end")
        assert view.poll()  # a read is started; it has not run a step yet
        view.action_top()  # no await in between: asked while that read is pending
        await pilot_until(pilot, lambda: "line 000" in view.text().plain, what="the top")
        assert "line 199" not in view.text().plain and not view.follow
