"""The dashboard's keys, defined once for the bindings, the footer, the ``?`` help
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
    Key(
        "e",
        "edit",
        "Edit",
        "e",
        "edit the selected job (waiting, or ended: then r runs it again)",
        "Edit the selected job",
    ),
    Key(
        "d",
        "remove",
        "Remove",
        "d",
        "remove the selected waiting job from the queue file",
        "Remove the selected job",
    ),
    Key(
        "K",
        "move_up",
        "Up",
        "K",
        "move the selected (or marked) waiting jobs up, past the next waiting one",
        "Move the selected job up",
    ),
    Key(
        "J",
        "move_down",
        "Down",
        "J",
        "move the selected (or marked) waiting jobs down, past the next waiting one",
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
        "details",
        "Job",
        "enter",
        "open the selected job's details: command, environment, every attempt, its log (esc back)",
        "Show the selected job's details",
    ),
    Key(
        "l",
        "focus_log",
        "Log",
        "l",
        "focus the selected job's log (arrows / pgup / pgdn scroll it, / searches it, esc back)",
        "Focus the log",
    ),
    Key("f", "follow", "Follow", "f", "follow the log on / off", "Follow the log on or off"),
    Key(
        "z",
        "zoom",
        "Zoom",
        "z",
        "zoom the log to the whole screen, and back (esc too)",
        "Zoom the log to the whole screen",
    ),
    Key(
        "o",
        "pager",
        "Pager",
        "o",
        "open the whole log in $PAGER (default less -R); quit it to come back",
        "Open the log in the pager",
    ),
    Key(
        "slash",
        "filter",
        "Filter",
        "/",
        "filter the queue as you type (part of a name, @failed, @waiting...); enter keeps it, "
        "esc clears it (in the focused log: search it)",
        "Filter the queue",
    ),
    Key("question_mark", "help", "Help", "?", "this help", "Show the keys"),
    Key(
        "q",
        "quit",
        "Quit",
        "q",
        "quit (asks when jobs run or wait: enter keeps the queue going in the background, "
        "l leaves running jobs with no new starts, k kills them)",
        "Quit gtui",
    ),
)

# Keys of the GPU panel: what it shows, not something done to the queue. Bound on the main
# screen, in the help screen, the command palette and the keys table of docs/dashboard.md, not
# in the footer (its two lines at 80 columns are full).
PANEL_KEYS: tuple[Key, ...] = (
    Key(
        "h",
        "holders",
        "Holders",
        "h",
        "who holds each GPU: one line per process under its bar (h again folds)",
        "Show or fold who holds each GPU",
    ),
    Key(
        "s",
        "sparks",
        "Sparklines",
        "s",
        "show / hide each GPU's memory and utilization over the last 5 minutes "
        "(shown by themselves from 50 rows)",
        "Show or hide the GPU sparklines",
    ),
)

# Keys of what the queue table shows. Not in the footer either (full at 80 columns): the queue
# box's title says the key while done jobs are folded, and the help lists it.
VIEW_KEYS: tuple[Key, ...] = (
    Key(
        "E",
        "toggle_done",
        "Done jobs",
        "E",
        "show the done jobs in their place in the queue, or fold them away again (folded, "
        "the queue shows what runs, waits or failed; a filter shows what it matches)",
        "Show or fold the done jobs",
    ),
    Key(
        "F",
        "toggle_groups",
        "Groups",
        "F",
        "fold each group (group = NAME, a sweep) into one line with its counts (done / "
        "running / waiting), or show its jobs again; the line's keys act on its first job",
        "Fold or show the groups",
    ),
)

# Keys for a need now and then, not every day: bound on the main screen and in the command
# palette (docs/preemption.md says the key), not in the footer (full at 80 columns).
ROOM_KEYS: tuple[Key, ...] = (
    Key(
        "M",
        "make_room",
        "Make room",
        "M",
        "make room now for the selected waiting job: stop the preemptible jobs of lower "
        "priority it needs (asks first, naming them)",
        "Make room for the selected job (preempt)",
    ),
)

KEY_BY_ACTION = {k.action: k for k in KEYS}

# Keys of the log wherever it has the focus (the main screen's, zoomed or not, and the job
# detail view's): for the help screen; the log widget binds them.
LOG_KEYS: tuple[tuple[str, str], ...] = (
    ("/", "search the log: enter finds (the last match while following, else the next one)"),
    ("n  N", "the next match below / the previous one above (every match is highlighted)"),
    ("↑ ↓ pgup pgdn", "scroll (k j too); scrolling up stops following"),
    ("g  G  home  end", "the top of the log / its end (following again)"),
    ("f  z  o", "follow on / off, zoom to the whole screen, open it in $PAGER"),
    ("esc", "back: from a zoomed log, from the log to the queue, from the details"),
)

# The add / edit form's keys (gtui.ui.screens.job_form): its own, then the text field's editing
# keys (Textual's Input: tests/ui/test_ui_app.py types each one into a field and checks it).
FORM_KEYS: tuple[tuple[str, str], ...] = (
    ("enter", "the next field; on the last one (env) add / save"),
    ("ctrl+s", "add / save from any field"),
    ("tab  shift+tab", "the next / previous field"),
    ("esc", "cancel: nothing is written"),
    ("ctrl+u  ctrl+k", "delete everything before / after the cursor"),
    ("ctrl+w", "delete the word before the cursor"),
    ("ctrl+a  ctrl+e", "to the start / end of the field (home / end too)"),
    ("ctrl+d", "delete the character under the cursor (delete too)"),
    ("← →  ctrl+← →", "move by a character / a word"),
)

# The job detail view (enter on a job).
DETAIL_KEYS: tuple[Key, ...] = (
    Key("escape", "back", "Back", "esc", "back to the queue (a zoomed log unzooms first)", "Back"),
    Key(
        "tab",
        "switch",
        "Details/Log",
        "tab",
        "move between the details and the log (each scrolls with the arrows)",
        "Move between the details and the log",
    ),
    Key("slash", "search", "Search", "/", "search the log", "Search the log"),
    Key("n", "search_next(1)", "Next", "n", "the next match below", "Next match"),
    Key("N", "search_next(-1)", "Prev", "N", "the previous match above", "Previous match"),
    Key("f", "follow", "Follow", "f", "follow the log on / off", "Follow the log on or off"),
    Key("z", "zoom", "Zoom", "z", "zoom the log to the whole screen, and back", "Zoom the log"),
    Key("o", "pager", "Pager", "o", "open the whole log in $PAGER", "Open the log in the pager"),
    Key("question_mark", "help", "Help", "?", "the keys", "Show the keys"),
)
