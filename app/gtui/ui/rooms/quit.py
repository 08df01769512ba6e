"""q: leave the dashboard, asking first what becomes of the jobs that have not ended."""

from __future__ import annotations

import os

from gtui.core.model import ACTIVE_STATES, JobState
from gtui.core.sched.handover import HANDOVER_STAY
from gtui.core.units import plural
from gtui.ui.rooms.view import MainView
from gtui.ui.screens.confirm import Choice, ConfirmScreen


def ask_quit(screen: MainView) -> None:
    """Quit at once when nothing of ours would go on; else ask: hand the queue over to a
    scheduler in the background, leave the jobs as they are, or kill them."""
    app = screen.app
    engine = screen.engine
    if getattr(app, "engine_stopped", False):
        return  # leaving already (the queue is being handed over)
    # The engine's truth, not the table's (which may be one flush behind); names and states
    # only, not a view of every job, which held the screen for seconds at 100,000 jobs.
    jobs = engine.names_in(JobState.RUNNING, JobState.SUSPENDED, JobState.QUEUED)
    active = [name for name, st in jobs if st in ACTIVE_STATES]
    # Jobs that would start without a person: not held, not in a paused queue.
    waiting = [] if engine.paused else [name for name, st in jobs if st == JobState.QUEUED]
    quit_ = getattr(app, "shutdown_and_exit", None)
    if quit_ is None:  # pragma: no cover - always a GtuiApp
        app.exit()
        return
    if not (active or waiting) or getattr(engine, "remote", False):
        # Nothing would go on, or attached to a scheduler that runs elsewhere: quitting
        # this screen leaves it and its jobs running; there is nothing of ours to stop.
        quit_(kill_jobs=False)
        return
    running = [name for name, st in jobs if st == JobState.RUNNING]
    suspended = [name for name, st in jobs if st == JobState.SUSPENDED]
    n = len(active)
    q = engine.queue_path.name
    what = ", ".join(
        part
        for part in (
            f"{len(running)} running" if running else "",
            f"{len(suspended)} suspended" if suspended else "",
            f"{len(waiting)} waiting" if waiting else "",
        )
        if part
    )
    listed = active + waiting
    names = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
    stays = " (a suspended job stays stopped)" if suspended else ""
    lines = [
        f"{plural(len(listed), 'job')} not ended ({what}): {names}.",
        "",
        "Keep going (enter, q): a scheduler in the background takes the queue over and "
        f"starts the waiting jobs, until {HANDOVER_STAY} after the last one ends; "
        f"`gtui {q}` shows it again, `gtui stop {q}` ends it.",
    ]
    if n:
        lines.append(
            f"Leave (l): running jobs go on{stays}, but no job starts until gtui opens {q} again."
        )
        lines.append("Kill (k): running jobs get SIGTERM (SIGKILL after kill_grace).")
    else:
        lines.append(f"Leave (l): no job starts until gtui opens {q} again.")
    body = "\n".join(lines)
    if screen.in_tmux or os.environ.get("TMUX"):
        body += f"\n\nTo keep the dashboard running too, detach instead: {screen.tmux_prefix} d."

    def chosen(value: str | None) -> None:
        hand_over = getattr(app, "hand_over_and_exit", None)
        if value == "handover" and hand_over is not None:
            hand_over()
        elif value in ("leave", "kill"):
            quit_(kill_jobs=value == "kill")

    choices = [
        Choice("q", "Keep going", "handover", "primary", default=True),
        Choice("l", "Leave", "leave"),
    ]
    if n:
        choices.append(Choice("k", "Kill, quit", "kill", "error"))
    app.push_screen(ConfirmScreen("Quit gtui?", body, choices), chosen)
