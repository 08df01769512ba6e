"""The job commands when no scheduler runs: the engine's own commands, with dispatch off.

``gtui pause/resume/retry/kill`` normally go through the running scheduler (app/core/control.py).
With none running they still work: an :class:`Engine` is opened on the queue with
``dispatch=False`` (it takes the queue lock, re-adopts or records jobs left by a scheduler that
stopped, and starts nothing), the command runs through the very same method, and the engine is
shut down again, leaving any job that still runs running. So there is one implementation of
every transition; this module only opens and closes the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from gtui.core.engine import Engine
from gtui.core.paths import QueuePaths

DONE = {
    "kill": "killed {}",
    "pause": "paused {}",
    "resume": "resumed {}",
    "retry": "queued {} again",
    "pause_queue": "paused the queue",
    "resume_queue": "resumed the queue",
}


async def apply(paths: QueuePaths, op: str, names: Sequence[str]) -> list[str]:
    """Do ``op`` on ``names`` with no scheduler; returns one line per job acted on.

    Raises LockedError if a scheduler holds the queue, GtuiError (nothing changed) for an unknown
    name or a job in the wrong state.
    """
    engine = Engine(paths.queue, control=False, dispatch=False)
    await engine.start()
    try:
        if op in ("pause_queue", "resume_queue"):
            await getattr(engine, op)()
            return [DONE[op]]
        await getattr(engine, op)(list(names))
        return [DONE[op].format(n) for n in names]
    finally:
        await engine.shutdown()
