"""``env_file``: variables a job gets from a file of ``KEY=VALUE`` lines, read at each start.

The dotenv shape most tools write: blank lines and ``#`` comments are skipped, an ``export ``
prefix is allowed, a value may be quoted (``"..."`` takes ``\\n``, ``\\"`` and ``\\\\``
escapes, ``'...'`` is taken as written), and an unquoted value ends at `` #``. Nothing is
expanded (``$HOME`` stays ``$HOME``): the file is data, not a script (``setup`` runs shell).
A file that is missing or has a line this cannot read is a :class:`EnvFileError` naming the
file and line, which fails the launch with that message.
"""

from __future__ import annotations

import re
from pathlib import Path

from gtui.core.errors import GtuiError

_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")
_ESCAPED = 'nt"\\$'  # what a backslash may escape in "...", and what each becomes:
_ESCAPED_AS = '\n\t"\\$'
MAX_ENV_FILE_BYTES = 1 << 20  # a file larger than this is not a list of variables


class EnvFileError(GtuiError):
    """An ``env_file`` that cannot be read: the message names the file (and the line)."""


def parse_env_file(text: str, shown: str) -> dict[str, str]:
    """The variables of ``text``, in file order (a name given twice: the last wins)."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            raise EnvFileError(f"env_file {shown}:{number}: expected KEY=VALUE, got {line[:60]!r}")
        out[m.group(1)] = _value(m.group(2), shown, number)
    return out


def _value(text: str, shown: str, number: int) -> str:
    """One value: quoted (its quotes and escapes taken off) or bare (up to a `` #``)."""
    if text[:1] in ("'", '"'):
        quote = text[0]
        end = _closing(text, quote)
        if end < 0:
            raise EnvFileError(f"env_file {shown}:{number}: the {quote} quote is not closed")
        rest = text[end + 1 :].strip()
        if rest and not rest.startswith("#"):
            raise EnvFileError(f"env_file {shown}:{number}: text after the closing {quote}")
        body = text[1:end]
        if quote == "'":
            return body
        return re.sub(r"\\(.)", _unescape, body)
    value = re.split(r"\s#", text, maxsplit=1)[0].strip()
    if "\0" in value:
        raise EnvFileError(f"env_file {shown}:{number}: a value cannot hold a NUL character")
    return value


def _unescape(m: re.Match[str]) -> str:
    i = _ESCAPED.find(m.group(1))
    return _ESCAPED_AS[i] if i >= 0 else m.group(0)


def _closing(text: str, quote: str) -> int:
    """Where the quote that opens ``text`` closes (-1: it does not); ``\\"`` does not close."""
    i = 1
    while i < len(text):
        c = text[i]
        if c == "\\" and quote == '"':
            i += 2
            continue
        if c == quote:
            return i
        i += 1
    return -1


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of the file at ``path``, read now; :class:`EnvFileError` if it is missing,
    unreadable, too large or not ``KEY=VALUE`` lines."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_ENV_FILE_BYTES + 1)
    except OSError as e:
        raise EnvFileError(f"env_file {path}: {e.strerror or e}") from None
    if len(data) > MAX_ENV_FILE_BYTES:
        raise EnvFileError(f"env_file {path}: larger than {MAX_ENV_FILE_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise EnvFileError(f"env_file {path}: not UTF-8 text") from None
    return parse_env_file(text, str(path))
