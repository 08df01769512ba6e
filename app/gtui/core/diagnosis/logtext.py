"""The structure of a job's log as diagnosis reads it: who wrote each line, which
lines are warnings, messages wrapped over several lines, and the last Python traceback.

A log as a job prints it is not one clean traceback. Launchers prefix each line with its rank
(``[rank3]:``, ``[default0]:``, ``[1,2]<stderr>:``), Ray and vLLM with their process
(``(EngineCore_DP0 pid=1)``), log viewers with a line number, containers with a time stamp;
ranks interleave; a terminal copy or a narrow pane hard-wraps a message at 80 or 120 columns;
libraries print warnings that mention the very words of real errors (a warning about memory is
not an out-of-memory). Everything here is plain text in, plain facts out: no rule knowledge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# --------------------------------------------------------------------------------------------
# Who wrote a line.

_PREFIX_RE = re.compile(
    r"""^(?:
        \[\d+\]\s                                   # a log viewer's line number: [1830]
      | \d{4}-\d\d-\d\dT[\d:.]+Z\s                  # kubectl --timestamps
      | \[\d{4}-\d\d-\d\dT[\d:.]+Z\]\s              # the same, bracketed
      | \d\d:\d\d:\d\d\.\d+\s                       # a bare time of day
      | [\w.-]+\s+\|\s                              # docker compose: "vllm-1  | "
      | \((?P<actor>\w+)\s+pid=\d+\)\s              # Ray / vLLM: (EngineCore_DP0 pid=12)
      | \[(?P<rank>rank\d+|default\d+|\d+,\d+)\](?:<std(?:out|err)>)?:\s?  # [rank3]: [1,2]<stderr>:
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Line:
    raw: str  # the cleaned line as it stands in the log
    text: str  # without launcher / viewer prefixes
    stream: str  # who wrote it: a rank or process tag, "" when unknown
    warning: bool  # a warning or an info line, not an error
    lower: str  # ``raw`` in lower case (its first LOWER_MAX characters): for keyword tests


def split_prefix(raw: str) -> tuple[str, str]:
    """``(stream, text)``: the line without its launcher prefixes, and the rank they name."""
    stream = ""
    text = raw
    for _ in range(4):
        m = _PREFIX_RE.match(text)
        if not m or m.end() == 0:
            break
        stream = m.group("rank") or m.group("actor") or stream
        text = text[m.end() :]
    return stream, text


# A warning: Python's warnings (``UserWarning:``), torch's C++ ones (``[W socket.cpp:...]``,
# ``[rank0]:[W409 ...]``), glog's ``W0806 ...``, and logging's WARNING / WARN level words.
# NCCL reports its errors as ``NCCL WARN``, so that one is not a warning.
_WARNING_RE = re.compile(
    r"^\s*\[?W\d{3,4}\s[\d:.]+"
    r"|^\s*\[W\s[\w.]+:\d+\]"
    r"|^\s*W\d{4}\s\d\d:\d\d"
    r"|\b\w*Warning:\s"
    r"|(?:^|[\s\[|:])(?<!NCCL )(?:WARNING|WARN)(?:[\s:\]|]|$)"
    r"|^\s*warnings\.warn\("
)
_INFO_RE = re.compile(r"\bNCCL INFO\b|^\s*\[?I\d{4}\s[\d:.]+|^\s*\[I\s[\w.]+:\d+\]")


def is_warning(text: str) -> bool:
    return bool(_WARNING_RE.search(text) or _INFO_RE.search(text))


LOWER_MAX = 20000


def structure(lines: Sequence[str]) -> list[Line]:
    out = []
    for raw in lines:
        stream, text = split_prefix(raw)
        out.append(
            Line(
                raw=raw,
                text=text,
                stream=stream,
                warning=is_warning(raw),
                lower=raw[:LOWER_MAX].lower(),
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Messages wrapped over several lines.

WRAP_MIN = 50
"""A line shorter than this is taken as whole: wrapping happens at 80 columns or wider."""

WINDOW_CHARS = 400
"""How much of each line a window joins (a 50 KB progress line stays cheap)."""

WINDOW_LINES = 3
"""A message is looked for across at most this many lines of the same writer."""

WINDOW_GAP = 8
"""Lines of other writers that may come between two parts of one message."""


@dataclass(frozen=True)
class Window:
    """Consecutive lines of one writer joined, where a wrapped message can be matched whole.

    ``joins`` are the texts tried (joined without a space, for a terminal that cut a word, and
    with one, for a wrap at a space); ``cuts`` are the offsets in each where the first line
    ends: a match counts only if it runs past that cut (else the single line has it)."""

    first: int  # index of its first line
    indices: tuple[int, ...]
    joins: tuple[tuple[str, int, str], ...]  # (joined text, cut, joined text in lower case)


def windows(lines: Sequence[Line]) -> list[Window]:
    out: list[Window] = []
    n = len(lines)
    for i, line in enumerate(lines):
        if len(line.raw) < WRAP_MIN or line.warning:
            continue
        indices = [i]
        j = i
        while len(indices) < WINDOW_LINES:
            nxt = _next_of_stream(lines, j, line.stream, n)
            if nxt is None or lines[nxt].warning or not lines[nxt].text.strip():
                break
            indices.append(nxt)
            if len(lines[nxt].raw) < WRAP_MIN:
                break
            j = nxt
        if len(indices) < 2:
            continue
        head = line.text[-WINDOW_CHARS:]
        rest = [lines[k].text.strip()[:WINDOW_CHARS] for k in indices[1:]]
        joins = []
        for sep in ("", " "):
            joined = head + sep + sep.join(rest)
            joins.append((joined, len(head), joined.lower()))
        out.append(Window(first=i, indices=tuple(indices), joins=tuple(joins)))
    return out


_CONTINUATION_RE = re.compile(r"^[a-z0-9).,;:'\"_-]")
_TOOL_PREFIX_RE = re.compile(r"^[\w./-]+: (?:line \d+: )?")  # bash: line 3: ..., sh: 1: ...
_BAR_RE = re.compile(r"\d+%\||it/s\b|s/it\b|[━█▏▎▍▌▋▊▉]|\| \d+/\d+ \[")


def message_at(lines: Sequence[Line], index: int) -> str:
    """The line at ``index`` with the lines before it that a hard wrap cut it from (a line
    that starts like the middle of a sentence continues the long line above it)."""
    parts = [lines[index].text]
    if _TOOL_PREFIX_RE.match(lines[index].text):
        return lines[index].raw
    k = index
    for _ in range(WINDOW_LINES - 1):
        if not _CONTINUATION_RE.match(lines[k].text):
            break
        prev = k - 1
        while prev >= 0 and lines[prev].stream != lines[index].stream and lines[index].stream:
            prev -= 1
        if (
            prev < 0
            or len(lines[prev].raw) < WRAP_MIN
            or lines[prev].warning
            or _BAR_RE.search(lines[prev].raw)
        ):
            break
        parts.insert(0, lines[prev].text[-WINDOW_CHARS:])
        k = prev
    return " ".join(p.strip() for p in parts) if len(parts) > 1 else lines[index].raw


def _next_of_stream(lines: Sequence[Line], j: int, stream: str, n: int) -> int | None:
    for k in range(j + 1, min(n, j + 2 + WINDOW_GAP)):
        if lines[k].stream == stream:
            return k
        if not stream:
            return None  # unprefixed output: only the very next line continues it
    return None


# --------------------------------------------------------------------------------------------
# The last Python exception and where it was raised.

_FRAME_RE = re.compile(
    r'^\s*File "?(?P<path>[^",]+?)"?\s?, line (?P<line>\d+)(?:, in (?P<func>\S+))?'
)
_RICH_FRAME_RE = re.compile(r"[│|]\s*(?P<path>\S+\.py):(?P<line>\d+) in (?P<func>[\w<>.]+)")
_EXC_LINE_RE = re.compile(
    r"^\s{0,4}(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure)"
    r"|KeyError|StopIteration))(?::\s?(?P<msg>.*))?$"
)
_TRACEBACK_RE = re.compile(r"Traceback \(most recent call last\)")
_CHAIN_RE = re.compile(
    r"^\s*(?:During handling of the above exception|The above exception was the direct cause)"
)
_WRAPPER_RE = re.compile(
    r"(?:^|\.)(?:ChildFailedError|CalledProcessError|ProcessRaisedException|ProcessExitedException"
    r"|RayTaskError\w*|SystemExit|KeyboardInterrupt)$"
)
_LIBRARY_RE = re.compile(
    r"site-packages|dist-packages|[/\\]lib[/\\]python\d|[/\\]Lib[/\\]|^<frozen|^<string>|^<stdin>"
    r"|pydev|[/\\]runpy\.py$|[/\\]importlib[/\\]|[/\\]multiprocessing[/\\]|[/\\]threading\.py$"
)


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str

    @property
    def where(self) -> str:
        short = re.split(r"[/\\]", self.path)
        name = "/".join(short[-2:]) if len(short) > 1 else self.path
        return f"{name}:{self.line}" + (f" ({self.func})" if self.func else "")

    @property
    def in_library(self) -> bool:
        return bool(_LIBRARY_RE.search(self.path))


@dataclass(frozen=True)
class PyException:
    index: int  # the line of ``Type: message``
    type: str  # as printed: ``torch.OutOfMemoryError``, ``KeyError``
    message: str
    frames: tuple[Frame, ...]  # oldest first, as printed

    @property
    def name(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    @property
    def user_frame(self) -> Frame | None:
        """The newest frame in the job's own code (not a library, not the interpreter)."""
        for f in reversed(self.frames):
            if not f.in_library:
                return f
        return None

    @property
    def raised_at(self) -> Frame | None:
        return self.frames[-1] if self.frames else None


def exception_lines(lines: Sequence[Line]) -> list[int]:
    """Lines that are a Python exception's ``Type: message`` (not a warning, not a frame)."""
    out = []
    for i, line in enumerate(lines):
        text = line.text
        if line.warning or _FRAME_RE.match(text):
            continue
        m = _EXC_LINE_RE.match(text)
        if m and (m.group("msg") is not None or text.strip() == m.group("type")):
            out.append(i)
    return out


def last_exception(lines: Sequence[Line]) -> PyException | None:
    """The exception that ended the job: the last one printed, unless it only wraps a child's
    (torchrun's ChildFailedError, a launcher's CalledProcessError), then the last real one."""
    found = exception_lines(lines)
    real = [i for i in found if not _is_wrapper(lines[i].text)]
    if not found:
        return None
    index = real[-1] if real else found[-1]
    return _exception_at(lines, index)


def _is_wrapper(text: str) -> bool:
    m = _EXC_LINE_RE.match(text)
    return bool(m and _WRAPPER_RE.search(m.group("type")))


def _exception_at(lines: Sequence[Line], index: int) -> PyException:
    m = _EXC_LINE_RE.match(lines[index].text)
    assert m is not None
    frames: list[Frame] = []
    stream = lines[index].stream
    for k in range(index - 1, max(-1, index - 400), -1):
        line = lines[k]
        if stream and line.stream and line.stream != stream:
            continue
        text = line.text
        if _TRACEBACK_RE.search(text) or _CHAIN_RE.match(text):
            break
        if k != index and _EXC_LINE_RE.match(text) and not _FRAME_RE.match(text):
            if frames:
                break
            continue
        fm = _FRAME_RE.match(text) or _RICH_FRAME_RE.search(text)
        if fm:
            frames.append(Frame(fm.group("path"), int(fm.group("line")), fm.group("func") or ""))
    frames.reverse()
    return PyException(
        index=index,
        type=m.group("type"),
        message=(m.group("msg") or "").strip(),
        frames=tuple(frames),
    )
