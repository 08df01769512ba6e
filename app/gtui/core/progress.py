"""How far a job has got, read from the tail of its log. Pure: text in, a fraction out.

A job says how far it is in one of the ways training code already prints, so nothing has to
change in the job:

- ``gtui:progress 0.42`` (or ``42%``) on a line of its own: the job's own word, taken first
  wherever it stands in the tail;
- a tqdm bar, ``desc: 45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s]``, redrawn in place with
  ``\\r`` (a log keeps every redraw: the last one counts); Hugging Face's Trainer prints exactly
  this bar over all its steps, so its bar is the whole run;
- PyTorch Lightning's bar, whose description is ``Epoch 3/9`` (Lightning 2.x: the epoch index
  counted from 0, then ``max_epochs - 1``): the run's fraction is (3 + the bar's fraction) / 10;
- an epoch line the job prints, ``epoch 3/10`` (counted from 1), followed by a per-epoch tqdm
  bar: (2 + the bar's fraction) / 10;
- Keras' progress bar (``120/500 ━━━━━━━━━━ 12s`` in Keras 3, ``120/500 [====>.....]`` in Keras
  2) after its ``Epoch 3/10`` line, read the same way.

Bars of a validation / test / sanity-check loop (Lightning's ``Validation DataLoader 0``) are
not the run's progress and are skipped. Among several bars in the tail, the last bar of the
largest total that has not finished is the run's (Hugging Face's short evaluation bar interleaves
with the training bar); with none unfinished, the last bar.

Only the tail is read (:data:`TAIL_BYTES` from the end, by byte offset, cut and decoded by
gtui.core.joblog, the one reader of a job's log), so a log of any size costs the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from gtui.core.joblog import decode, tail_start
from gtui.core.termtext import plain_text

TAIL_BYTES = 16 * 1024

_OWN = re.compile(r"gtui:progress\s*[:=]?\s*(\d+(?:\.\d+)?)\s*(%?)", re.IGNORECASE)
# tqdm's default bar: [desc: ]NN%|bar| n/total [elapsed<remaining, rate, postfix]. With
# unit_scale, n and total read 1.2k / 10.0M; an unknown total prints no "/total".
_NUM = r"\d+(?:\.\d+)?[kMGTPEZY]?"
_TQDM = re.compile(
    r"(?:(?P<desc>[^\r\n|]*?):?\s*)?(?P<pct>\d{1,3})%\|[^|]*\|\s*"
    rf"(?P<n>{_NUM})/(?P<total>{_NUM})"
    r"(?:\s*\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:?]+))?"
)
# Keras' Progbar (keras/src/utils/progbar.py): Keras 3 ``120/500 ━━━━━━━━━━ 12s 24ms/step``,
# Keras 2 ``120/500 [=====>........] - ETA: 12s``; an ``Epoch 3/10`` line (from 1) before it.
_KERAS = re.compile(r"(?<![\d/.])(?P<n>\d+)/(?P<total>\d+)\s+(?:\[[=>.]+\]|━+)")
_LIGHTNING_EPOCH = re.compile(r"^\s*Epoch\s+(\d+)/(\d+)\s*$")
_EPOCH_LINE = re.compile(r"\bepoch\s*[:=]?\s*(\d+)\s*/\s*(\d+)\b", re.IGNORECASE)
_NOT_TRAINING = re.compile(r"^\s*(validation|validating|sanity|test|predict|eval)", re.I)
_SCALE = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}


@dataclass(frozen=True)
class Progress:
    """How far a job is: ``fraction`` in [0, 1], where it was read from, and what it said."""

    fraction: float
    source: str  # "gtui" | "tqdm" | "lightning" | "epoch" (a bar after an epoch line)
    text: str  # what the log said, short: "450/1000", "epoch 3/10 · 176/391", "0.42"
    remaining_s: float | None = None  # what the bar itself estimated (tqdm's ``<01:42``)


@dataclass(frozen=True)
class _Bar:
    pos: int
    desc: str
    n: float
    total: float
    remaining_s: float | None


def _number(s: str) -> float:
    if s[-1] in _SCALE:
        return float(s[:-1]) * _SCALE[s[-1]]
    return float(s)


def _clock(s: str | None) -> float | None:
    """tqdm's ``[H:]MM:SS`` in seconds; None for ``?``."""
    if not s or "?" in s:
        return None
    secs = 0.0
    try:
        for part in s.split(":"):
            secs = secs * 60 + int(part)
    except ValueError:
        return None
    return secs


def _segments(text: str) -> list[str]:
    """The log's writes, in order: every ``\\r`` redraw and every line is its own segment."""
    # gtui's one stripper (termtext) per segment: escapes and controls go, Keras' backspaces
    # over its bar with them.
    parts = (plain_text(s) for s in re.split(r"[\r\n]", text))
    return [s for s in parts if s.strip()]


def parse_progress(text: str) -> Progress | None:
    """The job's progress as the tail ``text`` of its log last said it, or None."""
    own: Progress | None = None
    bars: list[_Bar] = []
    epoch_line: tuple[int, int, int] | None = None  # (position, current, of)
    for pos, seg in enumerate(_segments(text)):
        m = _OWN.search(seg)
        if m:
            value = float(m.group(1))
            if m.group(2) == "%" or value > 1.0:
                value /= 100.0
            own = Progress(min(1.0, max(0.0, value)), "gtui", m.group(1) + m.group(2))
            continue
        t = _TQDM.search(seg)
        if t:
            try:
                n, total = _number(t.group("n")), _number(t.group("total"))
            except ValueError:
                continue
            desc = (t.group("desc") or "").strip()
            if total > 0 and not _NOT_TRAINING.match(desc):
                bars.append(_Bar(pos, desc, n, total, _clock(t.group("remaining"))))
            continue
        k = _KERAS.search(seg)
        if k and int(k.group("total")) > 0:
            bars.append(_Bar(pos, "", float(k.group("n")), float(k.group("total")), None))
            continue
        e = _EPOCH_LINE.search(seg)
        if e and int(e.group(2)) > 0 and int(e.group(1)) <= int(e.group(2)):
            epoch_line = (pos, int(e.group(1)), int(e.group(2)))
    if own is not None:
        return own
    if not bars:
        return None
    last: dict[tuple[str, float], _Bar] = {}
    for b in bars:  # the last redraw of each bar
        last[(b.desc, b.total)] = b
    unfinished = [b for b in last.values() if b.n < b.total]
    bar = max(unfinished, key=lambda b: (b.total, b.pos)) if unfinished else bars[-1]
    frac = min(1.0, bar.n / bar.total)
    count = f"{_fmt(bar.n)}/{_fmt(bar.total)}"
    le = _LIGHTNING_EPOCH.match(bar.desc.removesuffix(":"))
    if le and int(le.group(1)) <= int(le.group(2)):
        epochs = int(le.group(2)) + 1
        done = (int(le.group(1)) + frac) / epochs
        return Progress(done, "lightning", f"epoch {le.group(1)}/{le.group(2)} · {count}")
    if epoch_line is not None and epoch_line[0] < bar.pos:
        _, cur, of = epoch_line
        return Progress((cur - 1 + frac) / of, "epoch", f"epoch {cur}/{of} · {count}")
    return Progress(frac, "tqdm", count, bar.remaining_s)


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def tail_offset(size: int, limit: int = TAIL_BYTES) -> int:
    """Where the tail of a log of ``size`` bytes starts."""
    return tail_start(size, limit)


def read_progress(read: Callable[[int, int], bytes], size: int) -> Progress | None:
    """The progress in the last :data:`TAIL_BYTES` of a log of ``size`` bytes, read through
    ``read(offset, limit)`` (the executor's ``read_log``, or a file's: ``joblog.reader``)."""
    if size <= 0:
        return None
    start = tail_offset(size)
    data = read(start, size - start)
    text = decode(data)
    if start:  # the first write is cut: drop it (a tqdm bar alone writes no newline)
        parts = re.split(r"[\r\n]", text, maxsplit=1)
        text = parts[1] if len(parts) > 1 else ""
    return parse_progress(text)
