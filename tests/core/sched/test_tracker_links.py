"""A tracker's run link printed by a real job (fake GPUs) is kept with its attempt: on the live
record while it runs (`gtui status --json`, asked of the running scheduler over its socket), in
the attempts history when it ends (`gtui report`, text and JSON), and after a restart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gtui.core.errors import GtuiError
from gtui.core.model import JobRecord, JobState
from gtui.core.sched.engine import Engine
from gtui.core.state.history import attempts, record_attempt
from gtui.core.state.store import Store
from tests.conftest import gtui, write_queue
from tests.waiting import until

WANDB = "https://wandb.ai/alice-lab/mnist/runs/3kq9x2ab"
MLFLOW = "http://gpu-box-3:5000/#/experiments/7/runs/0a1b2c3d4e5f"


def _queue(tmp_path: Path) -> Path:
    go = tmp_path / "go"
    return write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [[jobs]]
        name = "train"
        mem = "10G"
        cmd = '''echo 'wandb: ⭐️ View project at https://wandb.ai/alice-lab/mnist'
        echo 'wandb: 🚀 View run glorious-sun-12 at: {WANDB}'
        while [ ! -e {go} ]; do sleep 0.05; done
        echo 'wandb: 🚀 View run other at: https://wandb.ai/alice-lab/mnist/runs/second'
        '''

        [[jobs]]
        name = "short"
        gpus = 0
        cmd = "echo '🏃 View run bold-hen-42 at: {MLFLOW}'"
        """,
    )


def _job(doc: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(j for j in doc["jobs"] if j["name"] == name)


async def test_a_run_link_is_kept_shown_reported_and_survives_a_restart(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    engine = Engine(q, fake_gpus="80G")
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    await until(
        lambda: engine.view("train").record.links, what="the W&B link read", ignoring=(GtuiError,)
    )
    # While it runs: the running scheduler's own answer to the real command line.
    out = await asyncio.to_thread(gtui, "status", str(q), "--json")
    assert out.returncode == 0, out.stderr
    train = _job(json.loads(out.stdout), "train")
    assert train["state"] == "running"
    assert train["links"] == [{"tracker": "wandb", "url": WANDB}]  # the run's, not the project's
    (tmp_path / "go").touch()
    assert await asyncio.wait_for(task, 60) == 0

    # The first run link of the attempt stays; a short job's link, printed as it ended, too.
    db = engine.parts.runner.paths.db
    assert [a.links for a in attempts(db, "train")] == [(("wandb", WANDB),)]
    assert [a.links for a in attempts(db, "short")] == [(("mlflow", MLFLOW),)]

    out = gtui("report", str(q), "--json")
    assert out.returncode == 0, out.stderr
    jobs = {j["name"]: j for j in json.loads(out.stdout)["jobs"]}
    assert jobs["train"]["links"] == [{"attempt": 1, "tracker": "wandb", "url": WANDB}]
    assert jobs["short"]["links"] == [{"attempt": 1, "tracker": "mlflow", "url": MLFLOW}]
    text = gtui("report", str(q)).stdout
    assert "runs in trackers" in text
    assert f"train #1  W&B {WANDB}" in text and f"short #1  MLflow {MLFLOW}" in text

    # A scheduler started again reads them back: the record's and the history's.
    again = Engine(q, fake_gpus="80G")
    assert await asyncio.wait_for(again.run(exit_when_idle=True), 60) == 0
    assert again.view("train").record.links == [("wandb", WANDB)]
    assert [a.links for a in attempts(db, "train")] == [(("wandb", WANDB),)]
    out = gtui("status", str(q), "--json")  # no scheduler now: from the saved state
    assert _job(json.loads(out.stdout), "short")["links"] == [{"tracker": "mlflow", "url": MLFLOW}]


async def test_a_new_attempt_starts_without_the_last_one_s_links(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [[jobs]]
        name = "flaky"
        gpus = 0
        retries = 1
        cmd = '''if [ {{attempt}} = 1 ]; then echo 'wandb: 🚀 View run a at: {WANDB}'; exit 3; fi
        echo second'''
        """,
    )
    engine = Engine(q, fake_gpus="80G")
    assert await asyncio.wait_for(engine.run(exit_when_idle=True), 60) == 0
    db = engine.parts.runner.paths.db
    assert [a.links for a in attempts(db, "flaky")] == [(("wandb", WANDB),), ()]
    assert engine.view("flaky").record.links == []


def test_an_older_history_table_reads_no_links_and_gains_their_column(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with Store(db) as store:
        store.conn.execute(
            "CREATE TABLE attempts (name TEXT NOT NULL, attempt INTEGER NOT NULL, state TEXT "
            "NOT NULL, started_at REAL, ended_at REAL, exit_code INTEGER, signal INTEGER, "
            "diag_kind TEXT, diag_line TEXT, peak_mib INTEGER, gpus TEXT NOT NULL, log TEXT, "
            "PRIMARY KEY (name, attempt))"
        )
        store.conn.execute(
            "INSERT INTO attempts VALUES ('old', 1, 'done', 0, 60, 0, NULL, NULL, NULL, "
            "NULL, '[]', NULL)"
        )
        assert attempts(db, "old")[0].links == ()  # before the column exists
        rec = JobRecord(name="new", state=JobState.DONE, attempt=1, links=[("wandb", WANDB)])
        record_attempt(store, rec)
    assert attempts(db, "new")[0].links == (("wandb", WANDB),)
    assert attempts(db, "old")[0].links == ()
