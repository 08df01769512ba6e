"""The one builder of a scheduler: every command that runs a queue in this process (``gtui
run``, the dashboard's in-process engine) and the benchmarks get their Engine here, so that
the options a command takes reach the engine the same way."""

from __future__ import annotations

from pathlib import Path

from gtui.core.exec.base import Executor
from gtui.core.gpus.snapshot import GpuBackend
from gtui.core.sched.engine import Engine


def build_engine(
    queue_path: Path | str,
    *,
    fake_gpus: str | None = None,
    cluster: str | None = None,
    exits_with_run: bool = False,
    taking_over: bool = False,
    control: bool = True,
    dispatch: bool = True,
    executor: Executor | None = None,
    backend: GpuBackend | None = None,
) -> Engine:
    """The scheduler of ``queue_path``, not started yet (``start`` or ``run`` does that).

    ``fake_gpus``: ``--fake-gpus`` (over the file's ``fake_gpus``); ``cluster``: ``--backend``
    (over the file's ``[cluster]``); ``exits_with_run``: the process ends with the engine's
    ``run`` (`gtui stop` then waits for the process to be gone); ``taking_over``: the
    successor of a dashboard that handed its queue over (its start has crash points).
    ``control``: serve the control socket; ``dispatch``: start jobs (False: an engine that
    only applies commands); ``executor``, ``backend``: in place of the local processes and
    the GPUs read (the benchmarks' in-memory executor and simulated readings)."""
    engine = Engine(
        queue_path,
        fake_gpus=fake_gpus,
        cluster=cluster,
        control=control,
        dispatch=dispatch,
        executor=executor,
        backend=backend,
    )
    engine.exits_with_run = exits_with_run
    engine.taking_over = taking_over
    return engine
