"""A matrix job tells experiment trackers what it is: GTUI_PARAMS and WANDB_RUN_GROUP, as a real
job sees them, and a value the job sets itself wins."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gtui.core.sched.engine import Engine
from tests.conftest import write_queue


async def test_a_matrix_job_sees_its_params_and_its_sweep_group(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"

        [[jobs]]
        name = "sweep-{lr}"
        gpus = 0
        cmd = "echo P=$GTUI_PARAMS; echo G=$WANDB_RUN_GROUP"
        matrix = { lr = [0.1, 0.01], bs = [8] }

        [[jobs]]
        name = "own-{lr}"
        gpus = 0
        cmd = "echo P=$GTUI_PARAMS; echo G=$WANDB_RUN_GROUP"
        matrix = { lr = [1] }
        env = { WANDB_RUN_GROUP = "mine" }

        [[jobs]]
        name = "plain"
        gpus = 0
        cmd = "echo P=[$GTUI_PARAMS] G=[$WANDB_RUN_GROUP]"
        """,
    )
    engine = Engine(q, fake_gpus="80G")
    code = await asyncio.wait_for(engine.run(exit_when_idle=True), 30)
    assert code == 0

    def log(name: str) -> str:
        return Path(str(engine.view(name).record.log)).read_text()

    lines = log("sweep-0.1-bs=8").splitlines()
    params = next(line for line in lines if line.startswith("P="))[2:]
    assert json.loads(params) == {"lr": "0.1", "bs": "8"}
    assert "G=sweep-{lr}" in lines
    own = log("own-1")
    assert "G=mine" in own
    assert '"lr": "1"' in own
    assert "P=[] G=[]" in log("plain")
