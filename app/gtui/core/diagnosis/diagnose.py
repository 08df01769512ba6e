"""Why a job failed: a kind, the line of its log that shows it, and a hint a person can act on.

The engine calls :func:`read_log_tail` on the attempt's log (only its tail is read, by
gtui.core.joblog, the one reader of a job's log: logs can be huge) and :func:`diagnose` with the
exit status; on a CUDA out-of-memory it sizes the retry with :func:`oom_peak_mib` and
:func:`oom_retry_mem`; on a ``gpu_fault`` :func:`gpu_fault_device` says which GPU the log
names, if it names one.

The table is data (:mod:`gtui.core.diagnosis.rules`); this module applies it. Precedence, from
first to last (the first step that finds something decides):

1. gtui's own actions: ``killed_by_user``, then ``timed_out``.
2. The user's ``[[diagnose]]`` rules, in file order: they extend and override the defaults.
3. A GPU that failed (``gpu_fault``): an ECC error or a lost GPU decides whatever else happened.
4. Death by a signal a Python error does not send (SIGSEGV, SIGKILL, SIGBUS, SIGXFSZ; or exit
   139 / 137 / 135 / 153 from a shell): the errors its log printed before did not end it.
5. Root causes (``rules.ROOT``): CUDA OOM, KV cache, device-side assert, missing kernel image,
   driver too old, cuDNN, cuBLAS, device ordinal, tensors on two devices, no GPU, ports, wandb,
   the Hub, NaN loss, file descriptors, shared memory, quota, full disk, host OOM, segfault.
6. Causes that are often consequences or noise (``rules.CONSEQUENTIAL``): NCCL timeouts and
   errors (a rank that ran out of memory makes the others fail), other CUDA errors, imports,
   missing files, permissions, commands not found.
7. The job's own end: SIGABRT (``abort``, never "killed from outside"), then the Python
   exception that ended it (``runtime_error`` / ``python_exception``, naming the exception and
   the line of the job's code that raised it), then an abort seen only in the text.
8. Exit 127 / 126 with no text; a RuntimeError line with no traceback.
9. Otherwise ``error``, with the last exception-looking line (or the last non-empty line).

How the log is read (:mod:`gtui.core.diagnosis.logtext`): warnings and info lines are not
evidence (a warning that mentions "out of memory" is not an OOM); a message hard-wrapped over
several lines, or split by other ranks' output, is matched across its lines; launcher prefixes
(``[rank3]:``) say which lines belong together. Within steps 5 and 6 the rule whose match is
LATEST in the log wins (an earlier error may have been caught; the last one ended the job); two
rules matching the same line go to the one listed first. Across steps the earlier step wins even
when its line is older: in a DDP cascade the root cause (an OOM on one rank) comes first and the
NCCL errors of the other ranks follow it.

Size: the matching engine over the rule table (rules.py): reading the tail, ranking the
hits, the signals; its parts share the hit and line types and stay together.
"""

from __future__ import annotations

import functools
import os
import re
import signal as _signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gtui.core.diagnosis import rules as _rules
from gtui.core.diagnosis.hints import exception_hint, refine
from gtui.core.diagnosis.logtext import (
    WINDOW_GAP,
    WINDOW_LINES,
    Line,
    Window,
    last_exception,
    message_at,
    structure,
    windows,
)
from gtui.core.diagnosis.oom import oom_context, oom_peak_mib, oom_retry_mem
from gtui.core.diagnosis.rulematch import PatternOverrun
from gtui.core.joblog import decode, read_tail, tail_bytes
from gtui.core.model import Diagnosis, DiagnosisRule
from gtui.core.termtext import plain_text

__all__ = [
    "DEFAULT_RULES",
    "LINE_MAX",
    "TAIL_BYTES",
    "USER_LINE_MAX",
    "GpuRef",
    "Matcher",
    "clean_line",
    "clean_log",
    "diagnose",
    "full_disk",
    "gpu_fault_device",
    "local_search",
    "oom_peak_mib",
    "oom_retry_mem",
    "read_log_tail",
    "read_tail_bytes",
    "status_text",
    "validate_rule",
]

TAIL_BYTES = 65536
"""How much of a log's end :func:`read_log_tail` reads by default."""

USER_LINE_MAX = 2000
"""User patterns see each line cut to this many characters: with a backtracking pattern the
time grows with the line (polynomially or worse), so the cap keeps a sane-but-sloppy pattern
fast on a 50 KB tqdm line. It does not bound a catastrophic one: the deadline does."""

LINE_MAX = 300
"""``Diagnosis.line`` is cut to about this many characters."""

DEFAULT_RULES: tuple[DiagnosisRule, ...] = _rules.DEFAULT_RULES
"""gtui's own table, in precedence order (see the module docstring for how it is applied)."""

_TIMEOUT_HINT = (
    "gtui stopped it: it ran past its `timeout`. Raise `timeout` if it was still making "
    "progress; if its log had stopped moving it hung (a DDP rank waiting for a dead peer, a "
    "stuck DataLoader)."
)
_KILLED_HINT = (
    "Killed from gtui (`x` in the dashboard or `gtui kill`); `r` / `gtui retry` runs it again."
)
_ERROR_HINT = "No known cause matched: a [[diagnose]] rule in the queue file can name it next time."

# --------------------------------------------------------------------------------------------
# Reading and cleaning a log.


def _strip_codes(text: str) -> str:
    """The text a terminal would show, by gtui's one escape stripper (gtui.core.termtext)."""
    return plain_text(text)


def clean_line(raw: str) -> str:
    """One line as a terminal would have left it: the last ``\\r`` segment, no colour codes.

    tqdm redraws its bar with ``\\r``; the last segment that shows anything is what stayed on
    screen (a segment of only escape codes, like rich's cursor hiding, shows nothing).
    """
    if "\r" in raw:
        visible = [seg for seg in (_strip_codes(s) for s in raw.split("\r")) if seg.strip()]
        return visible[-1].rstrip() if visible else ""
    return _strip_codes(raw).rstrip()


def clean_log(text: str) -> str:
    """A whole log cleaned line by line (see :func:`clean_line`); idempotent."""
    return "\n".join(clean_line(raw) for raw in text.split("\n"))


def read_tail_bytes(f: BinaryIO, max_bytes: int = TAIL_BYTES) -> bytes:
    """The last ``max_bytes`` of a seekable binary file, read in one call from its end.

    When the read starts inside the file, the partial first line is dropped (it may also
    start inside a multi-byte character) unless it is the only line.
    """
    return tail_bytes(f, max_bytes)


def read_log_tail(path: Path, max_bytes: int = TAIL_BYTES) -> str:
    """The cleaned end of a log: at most ``max_bytes`` read, never the whole file.

    A missing or unreadable log gives ``""``: a job may fail before writing anything.
    """
    data = read_tail(path, max_bytes)
    return "" if data is None else clean_log(decode(data))


# --------------------------------------------------------------------------------------------
# Matching.


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    except re.error:
        return None


def validate_rule(rule: DiagnosisRule) -> str | None:
    """Why a (user's) rule cannot work, in words, or ``None``: for the queue file's checks."""
    if not rule.kind.strip():
        return "a diagnose rule needs a `kind`"
    if rule.pattern is None and not rule.exit_codes and not rule.signals:
        return "a diagnose rule needs a `pattern`, `exit_codes` or `signals`"
    if rule.pattern is not None:
        try:
            re.compile(rule.pattern)
        except re.error as e:
            return f"`pattern` is not a valid regular expression: {e}"
    return None


def _status_sets(exit_code: int | None, sig: int | None) -> tuple[set[int], set[int]]:
    """Exit codes and signals a status stands for: a shell reports signal N as exit 128+N."""
    codes: set[int] = set()
    sigs: set[int] = set()
    if sig:
        sigs.add(sig)
        codes.add(128 + sig)
    if exit_code is not None:
        if exit_code < 0:  # Popen's way of saying "killed by signal -exit_code"
            sigs.add(-exit_code)
            codes.add(128 - exit_code)
        else:
            codes.add(exit_code)
            if 128 < exit_code <= 128 + 64:
                sigs.add(exit_code - 128)
    return codes, sigs


@dataclass(frozen=True)
class _Hit:
    rule: DiagnosisRule
    index: int  # the line it matched (-1: matched by exit status only)
    start: int | None  # where in that line the match starts (a user rule's comes by pipe)
    text: str | None = None  # the lines a wrapped message was matched across, joined


def _match(
    rule: DiagnosisRule, lines: Sequence[str], codes: set[int], sigs: set[int]
) -> _Hit | None:
    """The rule's last match: status and pattern must both hold when both are given."""
    has_status = bool(rule.exit_codes or rule.signals)
    if has_status and not (codes.intersection(rule.exit_codes) or sigs.intersection(rule.signals)):
        return None
    if rule.pattern is None:
        return _Hit(rule, -1, None) if has_status else None
    rx = _compile(rule.pattern)
    if rx is None:
        return None
    for i in range(len(lines) - 1, -1, -1):
        m = rx.search(lines[i])
        if m:
            return _Hit(rule, i, m.start())
    return None


Matcher = Callable[[str, Sequence[str]], "tuple[int, int] | None"]
"""Runs one user pattern over lines: (last line matched, match start) or None; may raise
:class:`PatternOverrun` (gtui.core.diagnosis.rulematch.PatternWorker.search bounds it in time)."""


def local_search(pattern: str, lines: Sequence[str]) -> tuple[int, int] | None:
    """A :data:`Matcher` in this process, with no deadline: for callers that trust the rules."""
    rx = _compile(pattern)
    if rx is None:
        return None
    for i in range(len(lines) - 1, -1, -1):
        m = rx.search(lines[i])
        if m:
            return i, m.start()
    return None


def _user_match(
    rule: DiagnosisRule, lines: Sequence[str], codes: set[int], sigs: set[int], matcher: Matcher
) -> _Hit | None:
    """Like :func:`_match` for a user's rule: its pattern sees lines cut to USER_LINE_MAX and
    runs through ``matcher`` (a worker with a deadline in the engine)."""
    has_status = bool(rule.exit_codes or rule.signals)
    if has_status and not (codes.intersection(rule.exit_codes) or sigs.intersection(rule.signals)):
        return None
    if rule.pattern is None:
        return _Hit(rule, -1, None) if has_status else None
    found = matcher(rule.pattern, [line[:USER_LINE_MAX] for line in lines])
    if found is None:
        return None
    return _Hit(rule, found[0], found[1])


_EXC_RE = re.compile(
    r"(?:^|[\s\]>:|])(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt)(?::\s|:?\s*$)"
    r"|^\s*(?:[\w./-]+:\s*)?(?i:error|fatal(?: error)?)\b\s*[:!]"
)


def _last_exception_index(lines: Sequence[str]) -> int:
    for i in range(len(lines) - 1, -1, -1):
        if _EXC_RE.search(lines[i]):
            return i
    return -1


def _last_nonempty_index(lines: Sequence[str]) -> int:
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip():
            return i
    return -1


def _fallback_index(lines: Sequence[str]) -> int:
    i = _last_exception_index(lines)
    return i if i >= 0 else _last_nonempty_index(lines)


_BOILERPLATE_RE = re.compile(
    r"\s*If reserved (?:but unallocated )?memory is (?:large|>> allocated memory)\b.*$"
    r"|\s*See documentation for Memory Management.*$"
)


def _shown(line: str, match_start: int | None = None) -> str:
    """A line fit for the diagnosis panel: stripped, PyTorch's boilerplate advice cut, short."""
    text = _BOILERPLATE_RE.sub("", line).strip()
    if len(text) <= LINE_MAX:
        return text
    start = 0
    if match_start is not None:
        offset = len(line) - len(line.lstrip())
        start = max(0, min(match_start - offset, len(text)) - 40)
    if start == 0:
        return text[: LINE_MAX - 1] + "…"
    return "…" + text[start : start + LINE_MAX - 2] + "…"


# --------------------------------------------------------------------------------------------
# The default table against a log.

_DEFAULT_LINE_MAX = 20000
"""The defaults read at most this much of a line: a 50 KB progress line is still read, a
megabyte of one is not (an error message is never that long)."""


@functools.lru_cache(maxsize=256)
def _keywords(pattern: str) -> tuple[str, ...] | None:
    """Lower-case words one of which any match of ``pattern`` must contain (the longest plain
    literal of each top-level alternative), or None when an alternative has none: a line with
    none of them is not searched. A case-insensitive regex search costs a thousand times a
    substring test, and most lines of a log match no rule."""
    alternatives: list[str] = []
    current: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            current.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            j = pattern.find("]", i + 2)
            j = len(pattern) - 1 if j < 0 else j
            current.append(pattern[i : j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "|" and depth == 0:
            alternatives.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    alternatives.append("".join(current))
    keys = []
    for alt in alternatives:
        best = _longest_literal(alt)
        if len(best) < 3:
            return None
        keys.append(best.lower())
    return tuple(keys)


_META = set("()[]{}?*+|^$.")


def _longest_literal(alt: str) -> str:
    """The longest run of characters ``alt`` matches literally outside any group."""
    best = run = ""
    depth = 0
    i = 0
    while i < len(alt):
        c = alt[i]
        nxt = alt[i + 1] if i + 1 < len(alt) else ""
        if c == "\\" and nxt:
            literal = None if nxt.isalnum() else nxt  # \b \s \d \w: not literal
            step = 2
        elif c == "[":
            literal, step = None, alt.find("]", i + 2) + 1 - i if "]" in alt[i + 2 :] else 1
        elif c == "{":
            literal, step = None, alt.find("}", i) + 1 - i if "}" in alt[i:] else 1
        elif c in _META:
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            literal, step = None, 1
        else:
            literal, step = c, 1
        quantified = i + step < len(alt) and alt[i + step] in "?*{"
        if literal is not None and depth == 0 and not quantified:
            run += literal
        else:
            best = max(best, run, key=len)
            run = ""
        i += max(step, 1)
    return max(best, run, key=len)


_REGION = 90
"""A window is searched only when a keyword of the rule lies within this many characters of
where its lines were joined: a match that spans the join has its keyword there (the longest
keyword is shorter than this)."""


@dataclass(frozen=True)
class _Log:
    """A log as the default rules read it: its lines, its windows, and its whole text in lower
    case (wrapped lines joined with and without a space) for a first test of a rule."""

    lines: Sequence[Line]
    windows: Sequence[Window]
    texts: tuple[str, ...]

    @classmethod
    def of(cls, lines: Sequence[Line]) -> _Log:
        whole = "\n".join(line.lower for line in lines)
        wins = windows(lines)
        # Messages split by other writers' lines are not whole in any join of the whole log:
        # their windows' joins are added (few: most windows join adjacent lines).
        split = "\n".join(
            lower
            for w in wins
            if w.indices != tuple(range(w.first, w.first + len(w.indices)))
            for _, _, lower in w.joins
        )
        texts = (whole, whole.replace("\n", " "), whole.replace("\n", ""), split)
        return cls(lines, wins, texts)

    def may_match(self, keys: tuple[str, ...] | None) -> bool:
        return keys is None or any(k in t for k in keys for t in self.texts)


def _scan(rule: DiagnosisRule, log: _Log) -> _Hit | None:
    """The rule's latest match on a line that is not a warning, or across a wrapped message
    (a window's match must run past its first line: a single line would have it already)."""
    rx = _compile(rule.pattern) if rule.pattern is not None else None
    if rx is None or rule.pattern is None:
        return None
    keys = _keywords(rule.pattern)
    if not log.may_match(keys):
        return None
    lines, wins = log.lines, log.windows
    best: _Hit | None = None
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if line.warning:
            continue
        if keys is not None and not any(k in line.lower for k in keys):
            continue
        m = rx.search(line.raw[:_DEFAULT_LINE_MAX])
        if m:
            best = _Hit(rule, i, m.start())
            break
    for w in reversed(wins):
        if best is not None and w.first <= best.index:
            break
        for joined, cut, lower in w.joins:
            region = lower[max(0, cut - _REGION) : cut + _REGION]
            if keys is not None and not any(k in region for k in keys):
                continue
            m = rx.search(joined)
            if m and m.start() < cut < m.end():
                best = _Hit(rule, w.first, None, text=joined)
                break
        if best is not None and best.index == w.first:
            break
    return best


def _latest(rules: Sequence[DiagnosisRule], log: _Log) -> _Hit | None:
    """The hit on the latest line; on the same line, the rule listed first."""
    best: _Hit | None = None
    for rule in rules:
        hit = _scan(rule, log)
        if hit is not None and (best is None or hit.index > best.index):
            best = hit
    return best


def _status_hit(
    rules: Sequence[DiagnosisRule], codes: set[int], sigs: set[int]
) -> DiagnosisRule | None:
    for rule in rules:
        if codes.intersection(rule.exit_codes) or sigs.intersection(rule.signals):
            return rule
    return None


_SHM_CONTEXT_RE = re.compile(
    r"SemLock|/dev/shm|_share_fd|_share_filename|shared memory|torch_shm"
    r"|multiprocessing[/\\]synchronize"
)


def _reclassify(hit: _Hit, lines: Sequence[Line]) -> _Hit:
    """A "No space left on device" that a semaphore or a shared tensor hit is /dev/shm."""
    if hit.rule.kind == "no_space" and hit.index >= 0:
        context = "\n".join(line.raw for line in lines[max(0, hit.index - 25) : hit.index + 3])
        if _SHM_CONTEXT_RE.search(context):
            shm = next(r for r in _rules.ROOT if r.kind == "shm_full")
            return _Hit(shm, hit.index, hit.start, hit.text)
    return hit


def _from_hit(hit: _Hit, lines: Sequence[Line], *, default: bool) -> Diagnosis:
    """A diagnosis from a rule's hit; for a status-only hit, the log line that best shows it.

    A signal death shows its own text if the log has some ("Segmentation fault", "Killed"),
    else the last line (where the job was when it died): an older exception line would
    suggest a cause the status contradicts.
    """
    raw = [line.raw for line in lines]
    rule = hit.rule
    index, start, text = hit.index, hit.start, hit.text
    if index < 0:
        if default:
            same_kind = [
                r
                for r in _rules.ROOT + _rules.CONSEQUENTIAL + (_rules.ABORT_TEXT,)
                if r.kind == rule.kind
            ]
            text_hit = _latest(same_kind, _Log.of(lines))
            if text_hit is not None:
                index, start, text = text_hit.index, text_hit.start, text_hit.text
        if index < 0:
            index = (
                _last_nonempty_index(raw)
                if rule.signals or rule.exit_codes
                else _fallback_index(raw)
            )
    if index < 0:
        return Diagnosis(kind=rule.kind, line="", hint=rule.hint)
    if text is None:
        text = message_at(lines, index)
        if rule.kind == "cuda_oom":
            text = _oom_message(lines, raw, index)
    base = _rules.HINTS.get(rule.kind, rule.hint) if default and rule.pattern else rule.hint
    hint = refine(rule.kind, text, base, lines, index) if default else rule.hint
    if text != raw[index]:
        return Diagnosis(kind=rule.kind, line=_shown(text), hint=hint)
    return _diagnosis(rule.kind, raw, index, start, hint)


def _oom_message(lines: Sequence[Line], raw: Sequence[str], index: int) -> str:
    """An OOM message whole: wrapped onto the next lines, or cut by another rank's output."""
    text = oom_context(raw, index)
    if "allocate" in text.lower():
        return text
    for w in windows(lines[index : index + WINDOW_LINES + WINDOW_GAP]):
        if w.first == 0 and "allocate" in w.joins[1][0].lower():
            return w.joins[1][0]
    return text


_ABORT_SIGNALS = {int(_signal.SIGABRT)}


def _from_log(lines: Sequence[Line], codes: set[int], sigs: set[int]) -> Diagnosis | None:
    """Steps 3 to 8 of the module docstring: the default table against status and log."""
    log = _Log.of(lines)
    hit = _latest(_rules.HARDWARE, log)
    if hit is not None:
        return _from_hit(hit, lines, default=True)
    death = _status_hit(_rules.SIGNAL_DEATHS, codes, sigs)
    if death is not None:
        return _from_hit(_Hit(death, -1, None), lines, default=True)
    for tier in (_rules.ROOT, _rules.CONSEQUENTIAL):
        hit = _latest(tier, log)
        if hit is not None:
            return _from_hit(_reclassify(hit, lines), lines, default=True)
    abort_text = _scan(_rules.ABORT_TEXT, log)
    if sigs & _ABORT_SIGNALS:
        return _from_hit(abort_text or _Hit(_rules.ABORT_STATUS, -1, None), lines, default=True)
    exc = last_exception(lines)
    if exc is not None and (abort_text is None or abort_text.index < exc.index):
        rule = _rules.RUNTIME_ERROR if exc.name == "RuntimeError" else _rules.PYTHON_EXCEPTION
        raw = [line.raw for line in lines]
        line = _exception_context(raw, exc.index)
        hint = exception_hint(exc, rule.hint)
        return Diagnosis(kind=rule.kind, line=_shown(line), hint=hint)
    if abort_text is not None:
        return _from_hit(abort_text, lines, default=True)
    status_only = _status_hit(_rules.STATUS_ONLY, codes, sigs)
    if status_only is not None:
        return _from_hit(_Hit(status_only, -1, None), lines, default=True)
    hit = _scan(_rules.RUNTIME_ERROR, log)
    if hit is not None:
        return _from_hit(hit, lines, default=True)
    return None


def _exception_context(raw: Sequence[str], index: int) -> str:
    """The exception line, with the lines a long message was wrapped onto (a message cut by
    the terminal continues on lines that are not frames, not blank and not another message)."""
    text = raw[index]
    if len(text) < 79:
        return text
    for nxt in raw[index + 1 : index + 3]:
        if (
            not nxt.strip()
            or len(text) > LINE_MAX
            or re.match(r"\s*(?:File |Traceback|\w+Error)", nxt)
        ):
            break
        text = text + nxt
        if len(nxt) < 79:
            break
    return text


_OUTSIDE_SIGNALS = {
    int(s)
    for s in (
        _signal.SIGTERM,
        _signal.SIGINT,
        _signal.SIGHUP,
        _signal.SIGQUIT,
        _signal.SIGKILL,
        _signal.SIGUSR1,
        _signal.SIGUSR2,
        _signal.SIGALRM,
    )
}


def _unexplained(exit_code: int | None, signal: int | None, lines: Sequence[str]) -> Diagnosis:
    """Step 9: kind ``error``, the last exception-looking line, and what the status says."""
    what = status_text(exit_code, signal)
    _, sigs = _status_sets(exit_code, signal)
    if signal or (exit_code is not None and exit_code < 0):
        if sigs & _OUTSIDE_SIGNALS:
            what += ", sent from outside gtui (another user, an admin, the system)"
        else:
            what += ", which the process got from its own fault (not from outside gtui)"
    index = _last_exception_index(lines)
    if index >= 0:
        hint = f"It ended with {what}; the line above is the last error its log shows."
    else:
        index = _last_nonempty_index(lines)
        if index < 0:
            return Diagnosis(
                kind="error", line="", hint=f"It ended with {what} and its log is empty."
            )
        hint = f"It ended with {what}; the line above is the last line of its log."
    return _diagnosis("error", lines, index, None, f"{hint} {_ERROR_HINT}")


# --------------------------------------------------------------------------------------------
# A failed GPU.


@dataclass(frozen=True)
class GpuRef:
    """The GPU a ``gpu_fault`` log names: its CUDA index as the job saw it, or its PCI bus id
    (kernel and NVML messages name the bus), or both. None of them: the job's own GPU(s)."""

    index: int | None = None
    pci_bus_id: str | None = None


_PCI_RE = re.compile(r"\b(?:PCI:)?((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)\b")
_GPU_INDEX_RE = re.compile(
    r"nvmlDeviceGetHandleByIndex\((\d+)\)|CUDA device ordinal (\d+)|\bcuda:(\d+)\b"
    r"|\bGPU (\d+)\b(?![.:\d])"
)


def gpu_fault_device(text: str) -> GpuRef | None:
    """Which GPU a ``gpu_fault`` diagnosis line names, if any (``None``: not named).

    For the quarantine: a job on one GPU quarantines that GPU whatever this says; for a job on
    several, a PCI bus id maps to a physical GPU through NVML, a CUDA index to the job's own
    numbering (index N = the job's N-th GPU when it is isolated)."""
    pci = _PCI_RE.search(text)
    idx = _GPU_INDEX_RE.search(text)
    index = next((int(g) for g in idx.groups() if g is not None), None) if idx else None
    if pci is None and index is None:
        return None
    bus = pci.group(1).lower() if pci else None
    if bus is not None and bus.count(":") == 1:
        bus = "0000:" + bus
    if bus is not None and "." not in bus:
        bus += ".0"
    return GpuRef(index=index, pci_bus_id=bus)


# --------------------------------------------------------------------------------------------
# The entry point.


def status_text(exit_code: int | None, signal: int | None) -> str:
    """``exit code 1`` / ``signal 9 (SIGKILL)`` / ``an unknown exit status``, for messages."""
    _, sigs = _status_sets(exit_code, signal)
    if signal or (exit_code is not None and exit_code < 0):
        sig = next(iter(sigs))
        return f"signal {sig} ({_signal_name(sig)})"
    if exit_code is None:
        return "an unknown exit status"
    text = f"exit code {exit_code}"
    if sigs:
        sig = next(iter(sigs))
        text += f" (a shell's way of saying signal {sig}, {_signal_name(sig)})"
    return text


def _signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _diagnosis(
    kind: str, lines: Sequence[str], index: int, match_start: int | None, hint: str
) -> Diagnosis:
    line = _shown(lines[index], match_start) if index >= 0 else ""
    return Diagnosis(kind=kind, line=line, hint=hint)


FULL_DISK_BYTES = 1 << 20
"""Less free space than this on the log's file system counts as a full disk."""


def full_disk(log: Path) -> Diagnosis | None:
    """``no_space`` when a failed job's log sits on a full disk, else None. Then the disk is
    the likely cause, and the job's own error message was lost with the rest of its output, so
    its log cannot say so: the tail-based rules see only what was written before."""
    try:
        st = os.statvfs(log.parent)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free >= FULL_DISK_BYTES:
        return None
    return Diagnosis(
        kind="no_space",
        line=(
            f"the disk holding {log.parent} is full ({free // 1024} KiB free): the job's "
            "output, and perhaps its error message, could not be written"
        ),
        hint=(
            "Free space there (`df -h`, `du -sh`) or point log_dir elsewhere, then retry it; "
            "jobs that write nothing are not affected."
        ),
    )


def diagnose(
    exit_code: int | None,
    signal: int | None,
    log_tail: str,
    *,
    rules: Sequence[DiagnosisRule] = (),
    timed_out: bool = False,
    killed_by_user: bool = False,
    matcher: Matcher = local_search,
    on_overrun: Callable[[DiagnosisRule], None] | None = None,
) -> Diagnosis | None:
    """Why a job ended badly, or ``None`` if it succeeded (exit 0, no signal, not stopped).

    ``signal`` is the signal that killed it, if any (a negative ``exit_code``, Popen's
    convention, means the same); exit 128+N from a shell counts as signal N for rules.
    ``log_tail`` is the end of its log, raw or already cleaned. ``rules`` are the user's
    ``[[diagnose]]`` rules, tried first, through ``matcher``: a rule whose pattern runs past
    its deadline (:class:`PatternOverrun`) is skipped and given to ``on_overrun``, and the
    next rules decide. See the module docstring for the precedence.
    """
    raw = clean_log(log_tail).split("\n")
    if killed_by_user:
        return _diagnosis("killed_by_user", raw, _last_nonempty_index(raw), None, _KILLED_HINT)
    lines = structure(raw)
    if timed_out:
        inner = _from_log(lines, set(), set())  # its status is gtui's own signal: not evidence
        if inner is not None and inner.kind not in _GENERIC_KINDS:
            hint = f"{_TIMEOUT_HINT} Before that the log shows {inner.kind}: {inner.hint}"
            return Diagnosis(kind="timeout", line=inner.line, hint=hint)
        return _diagnosis("timeout", raw, _last_nonempty_index(raw), None, _TIMEOUT_HINT)
    if exit_code == 0 and not signal:
        return None
    codes, sigs = _status_sets(exit_code, signal)
    for rule in rules:
        try:
            hit = _user_match(rule, raw, codes, sigs, matcher)
        except PatternOverrun:
            if on_overrun is not None:
                on_overrun(rule)
            continue
        if hit is not None:
            return _from_hit(hit, lines, default=False)
    found = _from_log(lines, codes, sigs)
    return found if found is not None else _unexplained(exit_code, signal, raw)


_GENERIC_KINDS = frozenset({"runtime_error", "python_exception", "abort"})
