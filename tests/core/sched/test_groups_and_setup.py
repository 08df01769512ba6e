"""Groups, setup and env_file on real processes: a group's max_parallel holds while jobs
outside it go on; setup activates a virtual environment made here, whose module the job
imports; an env_file edited between attempts reaches the retry."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import sysconfig
from pathlib import Path

from gtui.core.api import Event, JobChanged
from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.waiting import until as wait_for

# A job that says it started, then waits for its release file (made by the test).
GATED = 'touch "started-$GTUI_JOB"; while [ ! -e release ]; do sleep 0.02; done'


def states(engine: Engine) -> dict[str, str]:
    return {v.record.name: v.record.state.value for v in engine.jobs()}


async def test_a_groups_max_parallel_holds_while_jobs_outside_it_go_on(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [groups.sweep]
        max_parallel = 2
        [[jobs]]
        name = "sweep-{{i}}"
        gpus = 0
        cmd = '{GATED}'
        matrix = {{ i = [1, 2, 3, 4, 5] }}
        [[jobs]]
        name = "other-{{i}}"
        group = "others"
        gpus = 0
        cmd = '{GATED}'
        matrix = {{ i = [1, 2, 3] }}
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    most = 0  # the most sweep jobs ever running at once, seen at every change

    def on_event(e: Event) -> None:
        nonlocal most
        if isinstance(e, JobChanged):
            running = [n for n, s in states(engine).items() if s == "running"]
            most = max(most, sum(n.startswith("sweep-") for n in running))

    engine.subscribe(on_event)
    task = asyncio.create_task(engine.run())
    try:
        started = lambda: sorted(p.name for p in tmp_path.glob("started-*"))  # noqa: E731
        await wait_for(lambda: len(started()) == 5, 30, "two sweep jobs and three others")
        assert sum(n.startswith("started-other") for n in started()) == 3
        await wait_for(
            lambda: engine.view("sweep-5").record.reason == "group sweep: 2 of 2 running",
            30,
            "the group's waiting reason",
        )
        assert sorted(n for n, s in states(engine).items() if s == "running") == [
            "other-1", "other-2", "other-3", "sweep-1", "sweep-2",
        ]  # fmt: skip
        (tmp_path / "release").touch()
        await wait_for(lambda: set(states(engine).values()) == {"done"}, 60, "all done")
        assert most == 2
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


def _venv_with_module(where: Path) -> Path:
    """A real virtual environment (no pip: quick) holding a module no other python has."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    lib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    Path(lib).mkdir(parents=True, exist_ok=True)
    (Path(lib) / "only_in_this_venv.py").write_text("VALUE = 'from the venv'\n")
    return venv


async def test_setup_activates_a_venv_whose_module_the_job_imports(tmp_path: Path) -> None:
    _venv_with_module(tmp_path)
    run = "python -c 'import only_in_this_venv as m; print(m.VALUE)'"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        setup = "source venv/bin/activate"
        [[jobs]]
        name = "uses-venv"
        gpus = 0
        cmd = "{run}"
        [[jobs]]
        name = "no-setup"
        gpus = 0
        setup = ""
        cmd = "python3 -c 'import only_in_this_venv'"
        [[jobs]]
        name = "bad-setup"
        gpus = 0
        setup = "source no-such-venv/bin/activate"
        cmd = "touch command-ran"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    task = asyncio.create_task(engine.run())
    try:
        ended = {"done", "failed"}
        await wait_for(
            lambda: len(states(engine)) == 3 and set(states(engine).values()) <= ended, 60, "ended"
        )
        assert states(engine) == {"uses-venv": "done", "no-setup": "failed", "bad-setup": "failed"}
        log = Path(str(engine.view("uses-venv").record.log)).read_text()
        assert "from the venv" in log
        # the job with no setup: its missing module's hint names `setup`
        d = engine.view("no-setup").record.diagnosis
        assert d is not None and d.kind == "import_error" and "`setup`" in d.hint
        # a failing setup fails the job before its command, and says so
        d = engine.view("bad-setup").record.diagnosis
        assert d is not None and d.kind == "setup_failed"
        assert d.line.startswith("gtui: setup failed (exit 1): source no-such-venv")
        assert not (tmp_path / "command-ran").exists()
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_env_file_is_read_again_at_each_attempt(tmp_path: Path) -> None:
    env = tmp_path / "job.env"
    env.write_text("# the first attempt fails on purpose\nexport TOKEN='bad value'\n")
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "reads-env"
        gpus = 0
        env_file = "job.env"
        cmd = 'echo "TOKEN=$TOKEN"; test "$TOKEN" = "good value"'
        [[jobs]]
        name = "missing-file"
        gpus = 0
        env_file = "nowhere.env"
        cmd = "true"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    task = asyncio.create_task(engine.run())
    try:
        await wait_for(lambda: states(engine).get("reads-env") == "failed", 30, "first attempt")
        first = Path(str(engine.view("reads-env").record.log)).read_text()
        assert "TOKEN=bad value" in first
        env.write_text('TOKEN="good value"  # fixed\n')
        await engine.retry(["reads-env"])
        await wait_for(lambda: states(engine).get("reads-env") == "done", 30, "the retry")
        rec = engine.view("reads-env").record
        assert rec.attempt == 2 and "TOKEN=good value" in Path(str(rec.log)).read_text()
        # a missing file: a launch failure that names it, not a traceback
        await wait_for(lambda: states(engine).get("missing-file") == "failed", 30, "missing file")
        d = engine.view("missing-file").record.diagnosis
        assert d is not None and d.kind == "launch"
        assert d.line == f"env_file {tmp_path / 'nowhere.env'}: No such file or directory"
        assert "env_file" in d.hint
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()
