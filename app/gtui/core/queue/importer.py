"""``gtui import``: a queue.toml from a ``quick_start_serial.sh``-style script or a command list.

Two inputs are understood:

- a bash queue script with its settings (``TARGET_GPUS``, ``RESERVED_GPUS``,
  ``MAX_RETRY_TIMES``, ``EXTREME_MODE``, ``ALLOW_SHARED_GPU``, ``LOG_DIR``, ``CHECK_INTERVAL``)
  and a ``COMMANDS=( "cmd | mem_GB | n_gpus" ... )`` array (``COMMANDS+=(...)`` appends). Only
  those lines are read; the rest of the script is ignored. Settings it does not write take the
  script's own defaults (reserve 1, retries -1), and ``multi_gpu_first`` is on, as in the script;
- any other text: one command per line (blank lines and ``#`` comments skipped, a trailing ``\\``
  continues a line), each optionally ending in ``| mem | n_gpus`` and optionally quoted as in
  the script's array.

Commands are turned into gtui's syntax so they run as before: ``${available_gpu}`` (or
``\\${...}``) becomes ``{gpu}``, ``${available_gpu_N}`` becomes ``{gpuN}``, and braces that gtui
would read (``{{``, ``}}``, ``{word}``) are escaped. The script never set
``CUDA_VISIBLE_DEVICES``, so when a command passes GPU numbers itself (``--gpu {gpu}``) the
job gets ``isolate = false`` with a comment saying why (with isolation, CUDA numbers the
job's GPUs from 0); the others stay isolated (a job that names no GPU would
spread over every GPU of the box). ``reserve_rule = "seed"`` keeps the script's reserve rule.
Jobs get explicit names made from their commands. What the input did before its commands
to set the shell up (``source ...activate``, ``conda activate``, ``export X=...``) becomes the
queue's ``setup`` (importsetup.py).

Size: one translator from the bash queue script's format; its sections follow that format's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from gtui.core.errors import GtuiError
from gtui.core.queue.checks import passes_gpu_numbers
from gtui.core.queue.encodings import EncodingProblem, decode_utf8, wide_encoding
from gtui.core.queue.importsetup import is_setup_line, setup_before, setup_value
from gtui.core.queue.names import cmd_slug, name_problem
from gtui.core.units import UnitError, parse_size_mib

SCRIPT_VARS = (
    "TARGET_GPUS",
    "RESERVED_GPUS",
    "MAX_RETRY_TIMES",
    "EXTREME_MODE",
    "ALLOW_SHARED_GPU",
    "LOG_DIR",
    "CHECK_INTERVAL",
    "RUN_IN_BACKGROUND",
    "DEBUG_MODE",
)
_ASSIGN = re.compile(
    r"^[ \t]*(?:export[ \t]+|readonly[ \t]+|declare[ \t]+(?:-\w+[ \t]+)*)?"
    r"(?P<var>" + "|".join(SCRIPT_VARS) + r")=(?P<rest>.*)$",
    re.MULTILINE,
)
_ARRAY = re.compile(
    r"^[ \t]*(?:declare[ \t]+-a[ \t]+|local[ \t]+)?COMMANDS(?P<plus>\+?)=\(", re.MULTILINE
)
_ESCAPE = re.compile(
    r"(?P<seed>\\?\$\{available_gpu(?:_(?P<n>\d+))?\})"
    r"|(?P<shell>\$\{[^}]*\})"
    r"|(?P<open>\{\{)"
    r"|(?P<close>\}\})"
    r"|\{(?P<ident>[A-Za-z_][A-Za-z0-9_]*)\}"
)
_TRUE = frozenset({"true", "1", "yes", "on"})


class ImportFailed(GtuiError):
    """The file cannot be imported; the message names the file (and line) and why."""


class _Unterminated(Exception):
    def __init__(self, line: int, quote: str) -> None:
        super().__init__(f"a {quote} quote opened here is never closed")
        self.line = line


@dataclass
class _Word:
    text: str
    line: int
    comments: list[str] = field(default_factory=list)  # comment lines just before it


@dataclass
class ImportedJob:
    cmd: str  # gtui syntax (placeholders converted, braces escaped)
    gpus: int
    mem: str | None  # as it will be written, e.g. "35G"
    comments: list[str] = field(default_factory=list)
    note: str | None = None


@dataclass
class Imported:
    """What the input said, ready to be written as a queue file."""

    source: str
    script: bool
    settings: list[tuple[str, str, str]] = field(default_factory=list)  # key, TOML value, comment
    jobs: list[ImportedJob] = field(default_factory=list)
    trailing: list[str] = field(default_factory=list)  # comments after the last command
    notes: list[str] = field(default_factory=list)  # for stderr


# ---------------------------------------------------------------------------------------------
# bash words


def _bash_words(
    text: str, pos: int, line: int, *, stop_at_paren: bool
) -> tuple[list[_Word], int, list[str], bool]:
    """Read bash words from ``text[pos:]`` until ``)`` (array) or end of line.

    Returns the words, the index after the stop, the comments left over, and whether the stop
    was found. Double quotes follow bash: ``\\`` escapes only ``$ ` " \\`` and newline.
    """
    words: list[_Word] = []
    pending: list[str] = []
    i = pos
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            if not stop_at_paren:
                return words, i, pending, True
            line += 1
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        if c == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            pending.append(text[i + 1 : end].strip())
            i = end
            continue
        if c == ")" and stop_at_paren:
            return words, i + 1, pending, True
        start_line = line
        buf: list[str] = []
        while i < n:
            c = text[i]
            if c in " \t\r\n" or (c == ")" and stop_at_paren):
                break
            if c == ";" and not stop_at_paren:
                break
            if c == "\\":
                if i + 1 < n and text[i + 1] == "\n":
                    line += 1
                elif i + 1 < n:
                    buf.append(text[i + 1])
                i += 2
                continue
            if c == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise _Unterminated(start_line, "'")
                chunk = text[i + 1 : end]
                line += chunk.count("\n")
                buf.append(chunk)
                i = end + 1
                continue
            if c == '"':
                j = i + 1
                while j < n and text[j] != '"':
                    if text[j] == "\\" and j + 1 < n and text[j + 1] in '$`"\\\n':
                        if text[j + 1] != "\n":
                            buf.append(text[j + 1])
                        else:
                            line += 1
                        j += 2
                        continue
                    if text[j] == "\n":
                        line += 1
                    buf.append(text[j])
                    j += 1
                if j >= n:
                    raise _Unterminated(start_line, '"')
                i = j + 1
                continue
            buf.append(c)
            i += 1
        words.append(_Word("".join(buf), start_line, pending))
        pending = []
        if not stop_at_paren and i < n and text[i] == ";":
            return words, i, pending, True
    return words, n, pending, not stop_at_paren


# ---------------------------------------------------------------------------------------------
# commands


def to_gtui_cmd(cmd: str) -> str:
    """The bash script's placeholders in gtui's syntax, and every brace gtui would read escaped, so
    the command runs exactly as the script ran it."""

    def repl(m: re.Match[str]) -> str:
        if m.group("seed") is not None:
            n = m.group("n")
            return "{gpu}" if n is None else f"{{gpu{n}}}"
        if m.group("shell") is not None:
            return m.group(0)
        if m.group("open") is not None:
            return "{{{{"
        if m.group("close") is not None:
            return "}}}}"
        return "{{" + m.group("ident") + "}}"

    return _ESCAPE.sub(repl, cmd)


def _is_number(text: str) -> bool:
    return re.fullmatch(r"\d+(?:\.\d+)?", text.strip()) is not None


def _mem_text(text: str) -> str | None:
    t = text.strip()
    if _is_number(t):
        return f"{t}G"
    try:
        parse_size_mib(t)
    except UnitError:
        return None
    return t


def split_entry(entry: str) -> tuple[str, str | None, int, str | None]:
    """``"cmd | mem | n"`` -> (cmd, mem, n_gpus, note). A command may hold pipes itself: only
    trailing fields that read as a size and a count are taken."""
    parts = entry.split("|")
    if len(parts) >= 3 and parts[-1].strip().isdigit():
        mem = _mem_text(parts[-2])
        if mem is not None:
            return "|".join(parts[:-2]).strip(), mem, int(parts[-1]), None
    if len(parts) >= 2:
        mem = _mem_text(parts[-1])
        if mem is not None:
            return "|".join(parts[:-1]).strip(), mem, 1, None
    note = "no `| mem | n_gpus` given: 1 GPU, to itself"
    return entry.strip(), None, 1, note


def _job(entry: str, comments: list[str]) -> ImportedJob | None:
    cmd, mem, n, note = split_entry(entry)
    if not cmd:
        return None
    if n == 0 and mem is not None:
        mem = None
    return ImportedJob(to_gtui_cmd(cmd), n, mem, comments, note)


# ---------------------------------------------------------------------------------------------
# the two inputs


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _toml_str(s: str) -> str:
    """``s`` as a TOML string: a literal string where that reads best (a command with
    backslashes or double quotes), else tomli-w's escaping. The file is new, written from
    nothing, so tomli-w writes its values; the layout around them (comments saying where each
    setting came from) is ours, since tomli-w writes no comments."""
    if "\n" not in s and "'" not in s and ('"' in s or "\\" in s) and s.isprintable():
        return f"'{s}'"
    return tomli_w.dumps({"v": s}).removeprefix("v = ").rstrip("\n")


def _bool(value: str) -> bool:
    return value.strip().lower() in _TRUE


def _script_settings(text: str, spans: list[tuple[int, int]], path: str, out: Imported) -> None:
    found: dict[str, tuple[str, str, int]] = {}
    for m in _ASSIGN.finditer(text):
        if any(a <= m.start() < b for a, b in spans) or m.group("var") in found:
            continue
        rest_start = m.start("rest")
        line = _line_of(text, m.start())
        try:
            words, _, _, _ = _bash_words(text, rest_start, line, stop_at_paren=False)
        except _Unterminated as e:
            raise ImportFailed(f"{path}:{e.line}: {m.group('var')}: {e}") from None
        value = words[0].text if words and words[0].line == line else ""
        found[m.group("var")] = (value, m.group(0).strip(), line)
    s = out.settings

    def src(var: str) -> str:
        return " ".join(found[var][1].split())

    if "TARGET_GPUS" in found:
        value = found["TARGET_GPUS"][0].strip()
        indices = value.replace(",", " ").split()
        if value == "all":
            s.append(("gpus", '"all"', src("TARGET_GPUS")))
        elif indices and all(w.isdigit() for w in indices):
            listed = "[" + ", ".join(str(int(w)) for w in indices) + "]"
            s.append(("gpus", listed, src("TARGET_GPUS")))
        else:
            out.notes.append(f'TARGET_GPUS={value!r} is not "all" or GPU numbers: using all GPUs')
    for var, key, default in (
        ("RESERVED_GPUS", "reserve", "1"),
        ("MAX_RETRY_TIMES", "retries", "-1"),
    ):
        if var in found:
            value = found[var][0].strip()
            if re.fullmatch(r"-?\d+", value) and int(value) >= (0 if key == "reserve" else -1):
                s.append((key, str(int(value)), src(var)))
                continue
            out.notes.append(f"{var}={value!r} is not a valid number: using the script's default")
        s.append((key, default, f"quick_start_serial.sh's default ({var}={default})"))
    # Right after `reserve` (its line is the first of the two appended just above or earlier).
    at = next(i for i, (k, _v, _c) in enumerate(s) if k == "reserve") + 1
    why = "the script's rule: one more GPU when exactly `reserve` are free"
    s.insert(at, ("reserve_rule", '"seed"', why))
    extreme = "EXTREME_MODE" in found and _bool(found["EXTREME_MODE"][0])
    shared_set = "ALLOW_SHARED_GPU" in found
    if extreme:
        s.append(("mode", '"pack"', src("EXTREME_MODE")))
    elif shared_set and not _bool(found["ALLOW_SHARED_GPU"][0]):
        s.append(("mode", '"exclusive"', src("ALLOW_SHARED_GPU")))
    elif shared_set or "EXTREME_MODE" in found:
        why = src("ALLOW_SHARED_GPU") if shared_set else src("EXTREME_MODE")
        s.append(("mode", '"shared"', why))
    if "LOG_DIR" in found:
        value = re.sub(r"^\$\{?HOME\}?(?=/|$)", "~", found["LOG_DIR"][0].strip())
        if value:
            note = src("LOG_DIR")
            if "$" in value:
                note += "; gtui expands only ~ here: replace the shell variables"
                out.notes.append(f"LOG_DIR={value!r} uses shell variables: edit log_dir")
            s.append(("log_dir", _toml_str(value), note))
    if "CHECK_INTERVAL" in found:
        value = found["CHECK_INTERVAL"][0].strip()
        if _is_number(value) and float(value) > 0:
            s.append(("poll", _toml_str(f"{value}s"), src("CHECK_INTERVAL")))
    s.append(("multi_gpu_first", "true", "the script starts multi-GPU commands first"))
    for var, why in (
        (
            "RUN_IN_BACKGROUND",
            "gtui runs in tmux: detach, then `gtui attach`; `gtui run` is headless",
        ),
        ("DEBUG_MODE", "gtui shows why each job waits, and a diagnosis of each failure"),
    ):
        if var in found:
            s.append(("#", "", f"{src(var)}: {why}"))


def parse_script(text: str, path: str) -> Imported | None:
    """The script form, or None when ``text`` has no ``COMMANDS=(`` array and no setting."""
    arrays = list(_ARRAY.finditer(text))
    has_vars = any(True for _ in _ASSIGN.finditer(text))
    if not arrays and not has_vars:
        return None
    out = Imported(source=path, script=True)
    spans: list[tuple[int, int]] = []
    words: list[_Word] = []
    trailing: list[str] = []
    for m in arrays:
        line = _line_of(text, m.start())
        try:
            got, end, rest, closed = _bash_words(text, m.end(), line, stop_at_paren=True)
        except _Unterminated as e:
            raise ImportFailed(f"{path}:{e.line}: COMMANDS: {e}") from None
        if not closed:
            raise ImportFailed(f"{path}:{line}: COMMANDS=( is never closed with )")
        spans.append((m.start(), end))
        if not m.group("plus"):
            words = []
        words.extend(got)
        trailing = rest
    _script_settings(text, spans, path, out)
    before = text[: spans[0][0]] if spans else ""
    _keep_setup(out, setup_before(before, SCRIPT_VARS))
    for w in words:
        job = _job(w.text, [c for c in w.comments if c])
        if job is not None:
            out.jobs.append(job)
    out.trailing = [c for c in trailing if c]
    return out


def parse_plain(text: str, path: str) -> Imported:
    """One command per line; quoted lines are read as the script's array entries."""
    out = Imported(source=path, script=False)
    comments: list[str] = []
    setup: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + lines[i]  # bash drops the backslash and the newline
        i += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#!"):
            continue
        if stripped.startswith("#"):
            comments.append(stripped[1:].strip())
            continue
        if not out.jobs and is_setup_line(stripped):  # before the first command
            setup.append(stripped)
            comments = []
            continue
        entry = stripped
        if stripped[0] in "\"'":
            try:
                words, _, _, _ = _bash_words(stripped, 0, lineno, stop_at_paren=False)
            except _Unterminated as e:
                raise ImportFailed(f"{path}:{lineno}: {e}") from None
            if len(words) == 1:
                entry = words[0].text
        job = _job(entry, [c for c in comments if c])
        comments = []
        if job is not None:
            out.jobs.append(job)
    out.trailing = [c for c in comments if c]
    _keep_setup(out, setup)
    return out


def _keep_setup(out: Imported, lines: list[str]) -> None:
    """What the input did before its commands, as the queue's ``setup`` (importsetup.py)."""
    setup = setup_value(lines)
    if setup is not None:
        why = "what the script ran before its commands"
        out.settings.append(("setup", _toml_str(setup), why))
        out.notes.append(f"kept as setup (runs before each job's command): {setup}")


# ---------------------------------------------------------------------------------------------
# output


def _names(jobs: list[ImportedJob]) -> list[str]:
    used: set[str] = set()
    names: list[str] = []
    for job in jobs:
        base = cmd_slug(job.cmd.replace("{{", "").replace("}}", "")) or "job"
        if name_problem(base):
            base = "job"
        name = base
        k = 2
        while name in used:
            name = f"{base}-{k}"
            k += 1
        used.add(name)
        names.append(name)
    return names


def render(imp: Imported) -> str:
    """The queue file, as text (it loads with :func:`gtui.core.queue.reader.load_queue`)."""
    kind = "quick_start_serial.sh-style script" if imp.script else "command list"
    out = [
        f"# Imported by `gtui import` from {imp.source} ({kind}).",
        "# Check it with `gtui validate`, then run it with `gtui QUEUE.toml`.",
        "",
    ]
    settings = list(imp.settings)
    if settings:
        out.append("[settings]")
        # (a long setup line is left out of the comments' column)
        width = max(
            (len(f"{k} = {v}") for k, v, _ in settings if k not in ("#", "setup")), default=0
        )
        for key, value, comment in settings:
            if key == "#":
                out.append(f"# {comment}")
                continue
            text = f"{key} = {value}"
            out.append(f"{text.ljust(width)}  # {comment}" if comment else text)
        out.append("")
    for job, name in zip(imp.jobs, _names(imp.jobs), strict=True):
        out.extend(f"# {c}" for c in job.comments)
        out.append("[[jobs]]")
        out.append(f"name = {_toml_str(name)}")
        out.append(f"cmd = {_toml_str(job.cmd)}")
        gpus_line = f"gpus = {job.gpus}"
        out.append(gpus_line + ("  # CPU job" if job.gpus == 0 else ""))
        if job.mem is not None:
            out.append(f"mem = {_toml_str(job.mem)}")
        elif job.note:
            out.append(f"# {job.note}")
        if job.gpus and passes_gpu_numbers(job.cmd):
            # Per job, never for the queue: a job that passes no GPU numbers (device_map="auto")
            # would spread over every GPU of the box without isolation.
            out.append(
                "isolate = false  # passes GPU numbers itself; isolation would renumber them from 0"
            )
        out.append("")
    out.extend(f"# {c}" for c in imp.trailing)
    return "\n".join(out).rstrip("\n") + "\n"


def import_text(text: str, path: str = "<stdin>") -> tuple[str, list[str]]:
    """The queue file made from ``text``, and notes for the user (stderr)."""
    imp = parse_script(text, path)
    if imp is None:
        imp = parse_plain(text, path)
    if not imp.jobs and not imp.settings:
        raise ImportFailed(
            f'{path}: found no commands: expected a COMMANDS=( "cmd | mem | n" ... ) array '
            "or one command per line"
        )
    return render(imp), imp.notes


def import_file(path: Path) -> tuple[str, list[str]]:
    """Read ``path`` and import it (errors: :class:`ImportFailed`, exit 2)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ImportFailed(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ImportFailed(f"{path}: is a directory; give a script or a command list") from None
    except OSError as e:
        raise ImportFailed(f"{path}: cannot read it: {e.strerror or e}") from None
    if b"\x00" in data and wide_encoding(data) is None:  # UTF-16 holds NULs: named below
        raise ImportFailed(f"{path}: not a text file (it holds NUL bytes)")
    try:
        text = decode_utf8(data)  # the queue file's own decoder: the same BOM, the same line
    except EncodingProblem as e:
        raise ImportFailed(f"{path}: {e}") from None
    return import_text(text, str(path))
