"""Tracker links read from a job's log: the lines W&B, MLflow and TensorBoard really print, the
lines that look close and are no run link, and the scan by byte offsets that feeds them.

Where the lines come from:
- W&B: the SDK's run header and footer (wandb/sdk/wandb_run.py, ``_header_run_info`` and
  ``_footer_sync_info``): ``wandb: 🚀 View run NAME at: URL``, ``wandb: ⭐️ View project at:
  URL``, ``wandb: 🧹 View sweep at: URL``; older versions ``wandb: Syncing run NAME`` then
  ``wandb: 🚀 View run at URL`` (no name, no colon), as pasted in many wandb/wandb issues.
- MLflow: mlflow/tracking/_tracking_service/client.py ``_log_url``: ``🏃 View run NAME at:
  {host}/#/experiments/{id}/runs/{run_id}`` and ``🧪 View experiment at:
  {host}/#/experiments/{id}``, printed when a run ends against a tracking server.
- TensorBoard: the server's own line, ``TensorBoard 2.x at http://HOST:6006/ (Press CTRL+C to
  quit)`` with the machine's name as host (as tensorflow/tensorboard's tracker shows it
  pasted, ``TensorBoard 1.x at http://MACHINE:6006``), and the uploader's ``View your TensorBoard at: https://tensorboard.dev/experiment/ID/``.
"""

from __future__ import annotations

from gtui.core.sched.linkwatch import BEHIND_MAX, CHUNK, scan
from gtui.core.trackers import TrackerLink, links_in, links_line, run_links

WANDB_NEW = """\
wandb: Currently logged in as: alice (alice-lab). Use `wandb login --relogin` to force relogin
wandb: Tracking run with wandb version 0.17.0
wandb: Run data is saved locally in /home/alice/proj/wandb/run-20240501_101500-3kq9x2ab
wandb: Run `wandb offline` to turn off syncing.
wandb: Syncing run glorious-sun-12
wandb: ⭐️ View project at https://wandb.ai/alice-lab/mnist
wandb: 🚀 View run at https://wandb.ai/alice-lab/mnist/runs/3kq9x2ab
epoch 1/10 loss 0.31
wandb: 🚀 View run glorious-sun-12 at: https://wandb.ai/alice-lab/mnist/runs/3kq9x2ab
wandb: ⭐️ View project at: https://wandb.ai/alice-lab/mnist
wandb: Find logs at: ./wandb/run-20240501_101500-3kq9x2ab/logs
"""
WANDB_RUN = "https://wandb.ai/alice-lab/mnist/runs/3kq9x2ab"
MLFLOW_RUN = "http://gpu-box-3:5000/#/experiments/7/runs/0a1b2c3d4e5f67890a1b2c3d4e5f6789"
MLFLOW = f"""\
2024/05/01 10:20:00 INFO mlflow.tracking.fluent: Experiment with name 'mnist' does not exist.
🏃 View run bold-hen-42 at: {MLFLOW_RUN}
🧪 View experiment at: http://gpu-box-3:5000/#/experiments/7
"""
TENSORBOARD = """\
Serving TensorBoard on localhost; to expose to the network, use a proxy or pass --bind_all
TensorBoard 2.15.1 at http://gpu-box-3:6006/ (Press CTRL+C to quit)
"""


def test_a_wandb_run_link_in_both_formats_with_its_name() -> None:
    found = links_in(WANDB_NEW)
    runs = [x for x in found if x.is_run]
    assert [x.url for x in runs] == [WANDB_RUN, WANDB_RUN]
    assert {x.name for x in runs} == {"glorious-sun-12"}  # the older line: from "Syncing run"
    assert [x.kind for x in found if not x.is_run] == ["project", "project"]
    assert all(x.tracker == "wandb" for x in found)


def test_a_self_hosted_wandb_server_and_its_sweep_line() -> None:
    found = links_in(
        "wandb: 🧹 View sweep at: https://wandb.corp.example/team/proj/sweeps/ab12cd\n"
        "wandb: 🚀 View run dainty-fog-3 at: https://wandb.corp.example/team/proj/runs/zz9\n"
    )
    assert [(x.kind, x.url) for x in found] == [
        ("sweep", "https://wandb.corp.example/team/proj/sweeps/ab12cd"),
        ("run", "https://wandb.corp.example/team/proj/runs/zz9"),
    ]


def test_mlflow_run_and_experiment_links() -> None:
    assert links_in(MLFLOW) == [
        TrackerLink("mlflow", "run", MLFLOW_RUN, "bold-hen-42"),
        TrackerLink("mlflow", "experiment", "http://gpu-box-3:5000/#/experiments/7"),
    ]


def test_tensorboard_served_and_uploaded() -> None:
    assert links_in(TENSORBOARD) == [TrackerLink("tensorboard", "run", "http://gpu-box-3:6006/")]
    up = "View your TensorBoard at: https://tensorboard.dev/experiment/AdYd1TgeTlaLWXx6I8JUbA/\n"
    assert [x.url for x in links_in(up)] == [
        "https://tensorboard.dev/experiment/AdYd1TgeTlaLWXx6I8JUbA/"
    ]


def test_terminal_escapes_and_carriage_returns_around_a_link() -> None:
    line = f"\x1b[34m\x1b[1mwandb\x1b[0m: 🚀 View run x at: \x1b[34m{WANDB_RUN}\x1b[0m\r\n"
    assert [x.url for x in links_in("50%|█████ | 5/10\r" + line)] == [WANDB_RUN]


def test_lines_that_look_close_are_no_run_link() -> None:
    near = "\n".join(
        [
            "see https://docs.wandb.ai/guides/runs for how runs work",  # no "wandb:" line
            "wandb: Find logs at: ./wandb/run-20240501_101500-3kq9x2ab/logs",  # not http
            "wandb: View run history with `wandb sync`",  # no URL
            "I said View run bold at: http://example.com/runs/1",  # not MLflow's #/experiments
            "View run x at: http://h:5000/#/experiments/abc/runs/1",  # experiment id not a number
            "Serving TensorBoard on localhost; to expose to the network, use --bind_all",
            "TensorBoard at http://localhost:6006/",  # no version: not the server's line
            "https://tensorboard.dev/ is shut down",
            "wandb: 🚀 View run at https://wandb.ai/alice/mnist",  # a project's URL: not a run
        ]
    )
    assert [x for x in links_in(near) if x.is_run] == []


def test_the_first_run_link_of_each_tracker_is_kept() -> None:
    found = links_in(WANDB_NEW + MLFLOW + TENSORBOARD)
    kept = run_links([], found)
    assert kept == [
        ("wandb", WANDB_RUN),
        ("mlflow", MLFLOW_RUN),
        ("tensorboard", "http://gpu-box-3:6006/"),
    ]
    second = links_in("wandb: 🚀 View run b at: https://wandb.ai/a/p/runs/second\n")
    assert run_links(kept, second) == kept  # a second W&B run of the attempt: its first stays
    assert links_line(kept[:1]) == f"W&B {WANDB_RUN}"


def _reader(data: bytes):  # type: ignore[no-untyped-def]
    return lambda off, n: data[off : off + n]


def test_the_scan_reads_whole_lines_and_a_line_being_written_next_time() -> None:
    line = f"wandb: 🚀 View run x at: {WANDB_RUN}\n".encode()
    log = b"step 1\n" + line[:30]  # the link's line half written
    end, found = scan(_reader(log), 0, len(log))
    assert found == [] and end == len(b"step 1\n")
    log += line[30:]
    end, found = scan(_reader(log), end, len(log))
    assert end == len(log) and [x.url for x in found] == [WANDB_RUN]
    assert scan(_reader(log), end, len(log)) == (end, [])  # nothing new: nothing read again


def test_the_last_look_takes_an_unfinished_last_line() -> None:
    log = f"wandb: 🚀 View run x at: {WANDB_RUN}".encode()  # no newline at the end
    end, found = scan(_reader(log), 0, len(log), final=True)
    assert end == len(log) and [x.url for x in found] == [WANDB_RUN]


def test_a_log_that_gushes_is_read_from_its_last_chunk() -> None:
    line = f"wandb: 🚀 View run x at: {WANDB_RUN}\n".encode()
    log = b"x" * 100 + b"\n" + b"noise line\n" * ((BEHIND_MAX + CHUNK) // 11) + line
    reads: list[tuple[int, int]] = []

    def read(off: int, n: int) -> bytes:
        reads.append((off, n))
        return log[off : off + n]

    end, found = scan(read, 0, len(log))
    assert end == len(log) and [x.url for x in found] == [WANDB_RUN]
    assert reads == [(len(log) - CHUNK, CHUNK)]  # never the whole log
