"""The dashboard's keys (DESIGN.md 6), defined once for the bindings, the footer, the ``?`` help
screen and the command palette, so the four can never disagree."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    keys: str  # Textual key names, comma-separated (the binding)
    action: str  # action name on the main screen (``action_<name>``)
    label: str  # short footer label
    shown: str  # how the key is written for people
    help: str  # one line for the help screen and the command palette
    palette: str  # the command palette's title


KEYS: tuple[Key, ...] = (
    Key("a", "add", "Add", "a", "add a job (a form, checked like the queue file)", "Add a job"),
    Key("e", "edit", "Edit", "e", "edit the selected waiting job", "Edit the selected job"),
    Key(
        "d",
        "remove",
        "Remove",
        "d",
        "remove the selected waiting job from the queue file",
        "Remove the selected job",
    ),
    Key(
        "K,shift+up",
        "move_up",
        "Up",
        "K",
        "move the selected waiting job up (also shift+up)",
        "Move the selected job up",
    ),
    Key(
        "J,shift+down",
        "move_down",
        "Down",
        "J",
        "move the selected waiting job down (also shift+down)",
        "Move the selected job down",
    ),
    Key(
        "t",
        "move_top",
        "Top",
        "t",
        "move the selected waiting job to the top of the queue",
        "Move the selected job to the top",
    ),
    Key(
        "p",
        "pause_job",
        "Pause",
        "p",
        "pause / resume the selected job (waiting: hold it; running: SIGSTOP / SIGCONT)",
        "Pause or resume the selected job",
    ),
    Key(
        "P",
        "pause_queue",
        "Pause queue",
        "P",
        "pause / resume the whole queue (no new starts; running jobs go on)",
        "Pause or resume the whole queue",
    ),
    Key(
        "x",
        "kill",
        "Kill",
        "x",
        "kill the selected job (asks first; SIGTERM, then SIGKILL)",
        "Kill the selected job",
    ),
    Key(
        "r",
        "retry",
        "Retry",
        "r",
        "run the selected failed / killed / done job again",
        "Retry the selected job",
    ),
    Key(
        "enter",
        "focus_log",
        "Log",
        "enter",
        "focus the selected job's log (arrows / pgup / pgdn scroll it, esc goes back)",
        "Focus the log",
    ),
    Key("f", "follow", "Follow", "f", "follow the log on / off", "Follow the log on or off"),
    Key("slash", "filter", "Filter", "/", "filter the queue by state or name", "Filter the queue"),
    Key("question_mark", "help", "Help", "?", "this help", "Show the keys"),
    Key(
        "q",
        "quit",
        "Quit",
        "q",
        "quit (asks when jobs run: they keep running and are re-adopted next time, or kill them)",
        "Quit gtui",
    ),
)

KEY_BY_ACTION = {k.action: k for k in KEYS}
