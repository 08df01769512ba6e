"""Experiment-tracker links a job prints in its log (W&B, MLflow, TensorBoard). Pure: text in,
links out; the scheduler's link watch (sched/linkwatch.py) feeds it the new bytes of a log.

The lines read are the ones the trackers themselves print, so nothing has to change in a job:

- W&B: ``wandb: 🚀 View run NAME at: https://wandb.ai/ENTITY/PROJECT/runs/ID`` (older
  versions: ``wandb: 🚀 View run at https://...``, after ``wandb: Syncing run NAME``), and
  ``wandb: ⭐️ View project at https://wandb.ai/ENTITY/PROJECT`` (a project, not a run); a
  W&B server of one's own has another host, the same words;
- MLflow: ``🏃 View run NAME at: http://HOST:5000/#/experiments/N/runs/ID`` and ``🧪 View
  experiment at: http://HOST:5000/#/experiments/N`` (an experiment, not a run);
- TensorBoard: ``TensorBoard 2.15.1 at http://HOST:6006/ (Press CTRL+C to quit)`` (the board a
  job serves itself) and an uploaded board, ``https://tensorboard.dev/experiment/ID/``.

A line is read once its run link is whole: a URL is taken up to the first blank or quote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gtui.core.termtext import plain_text

TRACKERS = ("wandb", "mlflow", "tensorboard")
LABELS = {"wandb": "W&B", "mlflow": "MLflow", "tensorboard": "TensorBoard"}  # as people say them

# What every line read here holds: a cheap first test, on a line or on a log's bytes.
WORDS = ("View ", "TensorBoard ", "tensorboard.dev/", "Syncing run")
WORDS_BYTES = tuple(w.encode() for w in WORDS)

_URL = r"(?P<url>https?://[^\s\"'<>`]+)"
# W&B's own lines start with "wandb:"; "View run|project|sweep [NAME] at[:] URL".
_WANDB = re.compile(
    r"^\s*wandb:\s.*?\bView (?P<what>run|project|sweep)(?: (?P<name>.+?))? at:? " + _URL
)
_WANDB_SYNCING = re.compile(r"^\s*wandb:\s+Syncing run (?P<name>\S.*?)\s*$")
# MLflow's URL is its UI's: ``#/experiments/N`` then ``/runs/ID`` for a run.
_MLFLOW = re.compile(
    r"\bView (?P<what>run|experiment)(?: (?P<name>.+?))? at: "
    r"(?P<url>https?://\S+?/#/experiments/\d+(?P<run>/runs/[0-9A-Za-z]+)?)/?(?=\s|$)"
)
_TENSORBOARD = re.compile(r"^\s*TensorBoard \d[\w.+-]* at " + _URL)
_TENSORBOARD_DEV = re.compile(r"(?P<url>https://tensorboard\.dev/experiment/[0-9A-Za-z_-]+/?)")


@dataclass(frozen=True)
class TrackerLink:
    """One link a tracker printed: ``tracker`` is one of :data:`TRACKERS`; ``kind`` is "run"
    for a run's own page (a TensorBoard the job serves counts as its run's), else "project",
    "sweep" or "experiment"; ``name``: the run's name where the line gives it, else ""."""

    tracker: str
    kind: str
    url: str
    name: str = ""

    @property
    def is_run(self) -> bool:
        return self.kind == "run"


def _line_links(line: str, syncing: str) -> list[TrackerLink]:
    m = _WANDB.search(line)
    if m:
        url = m.group("url").rstrip(".,;)")
        kind = m.group("what")
        if kind == "run" and "/runs/" not in url:  # not a run's page: its project's
            kind = "project"
        name = (m.group("name") or "").strip() or (syncing if kind == "run" else "")
        return [TrackerLink("wandb", kind, url, name)]
    m = _MLFLOW.search(line)
    if m:
        kind = "run" if m.group("what") == "run" and m.group("run") else "experiment"
        return [TrackerLink("mlflow", kind, m.group("url"), (m.group("name") or "").strip())]
    m = _TENSORBOARD.search(line)
    if m:
        return [TrackerLink("tensorboard", "run", m.group("url").rstrip(".,;)"))]
    return [TrackerLink("tensorboard", "run", u) for u in _TENSORBOARD_DEV.findall(line)]


def links_in(text: str) -> list[TrackerLink]:
    """Every tracker link in ``text`` (lines of a log; ``\\r`` redraws and terminal escapes
    as a log keeps them), in the order printed."""
    out: list[TrackerLink] = []
    syncing = ""  # an older W&B names the run on the line before its link
    for raw in re.split(r"[\r\n]", text):
        if not any(w in raw for w in WORDS):
            continue  # most lines of a log: not stripped, no pattern tried
        line = plain_text(raw)
        s = _WANDB_SYNCING.match(line)
        if s:
            syncing = s.group("name")
            continue
        out.extend(_line_links(line, syncing))
    return out


def run_links(
    kept: Sequence[tuple[str, str]], found: Iterable[TrackerLink]
) -> list[tuple[str, str]]:
    """``kept`` (tracker, url) pairs with the first run link of each tracker in ``found`` not
    kept yet: one run link per tracker per attempt, the first printed (W&B prints its run's
    link again at the end; a job that starts a second run of one tracker keeps its first)."""
    have = {t for t, _ in kept}
    out = list(kept)
    for link in found:
        if link.is_run and link.tracker not in have:
            have.add(link.tracker)
            out.append((link.tracker, link.url))
    return out


def links_json(pairs: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    """The ``links`` of ``gtui status --json`` and ``gtui report --json``."""
    return [{"tracker": t, "url": u} for t, u in pairs]


def links_line(pairs: Iterable[tuple[str, str]]) -> str:
    """``W&B https://... · MLflow http://...``: the links as the detail view and the text
    report write them ("" for none)."""
    return " · ".join(f"{LABELS.get(t, t)} {u}" for t, u in pairs)
