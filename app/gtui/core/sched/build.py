"""The one builder of a scheduler: every command that runs a queue in this process (``gtui
run``, the dashboard's in-process engine) gets its Engine here, so that the options a
command takes reach the engine the same way."""

from __future__ import annotations

from pathlib import Path

from gtui.core.sched.engine import Engine


def build_engine(
    queue_path: Path | str,
    *,
    fake_gpus: str | None = None,
    cluster: str | None = None,
    exits_with_run: bool = False,
    taking_over: bool = False,
) -> Engine:
    """The scheduler of ``queue_path``, not started yet (``start`` or ``run`` does that).

    ``fake_gpus``: ``--fake-gpus`` (over the file's ``fake_gpus``); ``cluster``: ``--backend``
    (over the file's ``[cluster]``); ``exits_with_run``: the process ends with the engine's
    ``run`` (`gtui stop` then waits for the process to be gone); ``taking_over``: the
    successor of a dashboard that handed its queue over (its start has crash points)."""
    engine = Engine(queue_path, fake_gpus=fake_gpus, cluster=cluster)
    engine.exits_with_run = exits_with_run
    engine.taking_over = taking_over
    return engine
