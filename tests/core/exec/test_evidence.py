"""The traces a queue's jobs leave outside the state database (gtui.core.state.evidence): each
job's newest attempt among its exit-status files, logs (and their variants) and live wrappers,
for names with dots and names made safe for a file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gtui.core.exec import runner
from gtui.core.exec.base import ExitStatus, LaunchRequest
from gtui.core.state.evidence import gather


def _touch(folder: Path, name: str, text: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_the_newest_attempt_of_each_job_from_status_files_and_logs(tmp_path: Path) -> None:
    run, logs = tmp_path / "run", tmp_path / "logs"
    _touch(run, "a.1.status", "exit 1\n")
    _touch(run, "a.2.status", "exit 0\n")
    _touch(logs, "a.1.log")
    _touch(logs, "a.2.log")
    _touch(logs, "a.2.1.log")  # a second log of attempt 2: the newer one
    _touch(logs, "lr.0.1.1.log")  # job "lr.0.1", attempt 1, no status: the log alone
    _touch(logs, "other.1.log")  # not a job of this queue
    _touch(run, f"{runner.safe_name('a/b')}.3.status", "signal 9\n")
    found = gather(["a", "lr.0.1", "never", "a/b"], run, logs)
    assert list(found) == ["a", "lr.0.1", "a/b"]  # queue order; a job with no trace left out
    a = found["a"]
    assert (a.attempt, a.status, a.log) == (2, ExitStatus(0, None), str(logs / "a.2.1.log"))
    lr = found["lr.0.1"]
    assert (lr.attempt, lr.status_path, lr.log) == (1, None, str(logs / "lr.0.1.1.log"))
    assert found["a/b"].attempt == 3 and found["a/b"].status == ExitStatus(None, 9)


def test_a_second_run_of_an_attempt_is_read_from_its_own_status_file(tmp_path: Path) -> None:
    """A launch that finds an attempt's status file there writes ``NAME.N.V.status`` beside it
    (it never deletes another run's): the newest of them says how the attempt ended."""
    run, logs = tmp_path / "run", tmp_path / "logs"
    _touch(run, "a.1.status", "exit 1\n")
    _touch(run, "a.1.2.status", "exit 0\n")
    _touch(run, "a.1.1.status", "signal 9\n")
    found = gather(["a"], run, logs)["a"]
    assert (found.attempt, found.status) == (1, ExitStatus(0, None))
    assert found.status_path == str(run / "a.1.2.status")


def test_a_running_wrapper_is_found_by_its_status_files_folder(tmp_path: Path) -> None:
    run, logs = tmp_path / "q.run", tmp_path / "logs"
    release = tmp_path / "release"
    handle = runner.launch(
        LaunchRequest(
            name="long",
            attempt=2,
            cmd=f"while [ ! -e {release} ]; do sleep 0.05; done",
            cwd=tmp_path,
            env={"GTUI_TOKEN": "tok", "CUDA_VISIBLE_DEVICES": "1,3"},
            log_dir=logs,
            run_dir=run,
        )
    )
    try:
        found = gather(["long"], run, logs)["long"]
        assert found.wrapper is not None and found.wrapper.pid == handle.pid
        assert found.attempt == 2 and found.wrapper.env["GTUI_TOKEN"] == "tok"
        assert found.gpus() == (1, 3)
        assert gather(["long"], tmp_path / "other.run", logs) == {}  # another queue's
    finally:
        release.touch()
        assert asyncio.run(runner.wait_exit(handle)) == ExitStatus(0, None)
    assert gather(["long"], run, logs)["long"].wrapper is None


def test_logs_alone_count_only_where_the_queue_has_run(tmp_path: Path) -> None:
    """A second queue file beside the first shares its log folder: the first's logs of the
    same job names are not the second's traces until the second has run a job here."""
    run, logs = tmp_path / "q2.run", tmp_path / "logs"
    _touch(logs, "train.1.log")
    assert gather(["train", "eval"], run, logs) == {}
    _touch(run, "eval.1.status", "exit 0\n")
    assert set(gather(["train", "eval"], run, logs)) == {"train", "eval"}
