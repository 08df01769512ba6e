"""Placeholders in a job's ``cmd``.

Only a closed set of names is replaced, so shell text that merely looks like a placeholder is
safe: ``awk '{print $1}'``, ``${HOME}``, ``find . -exec rm {} +`` are left exactly as written.

- ``{gpu}`` the assigned physical indices joined by commas (empty for a CPU job), ``{gpu0}``,
  ``{gpu1}``... one index each, ``{n_gpus}``, ``{port}`` (a free TCP port, allocated by the engine
  only when the command uses it), ``{name}``, ``{attempt}``, and the job's ``matrix`` keys;
- the bash queue script's ``${available_gpu}`` (= ``{gpu}``) and ``${available_gpu_N}``
  (= ``{gpuN}``), also in the escaped form ``\\${...}`` that commands copied out of its bash
  array carry;
- ``{{`` and ``}}`` are always escapes for one literal brace (as in Python's ``str.format``), so a
  literal ``{{`` (docker's ``--format '{{.Names}}'``) is written ``{{{{``;
- any other ``{...}`` or ``${...}`` is left alone. A ``${...}`` is bash's, never ours (except the
  bash script's two names), so ``${port}`` stays a shell variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NoReturn

BUILTIN_NAMES = frozenset({"gpu", "n_gpus", "port", "name", "attempt"})
_GPU_N = re.compile(r"gpu(\d+)")

# One alternation scanned left to right, so each brace is read in exactly one role.
_TOKEN = re.compile(
    r"(?P<seed>\\?\$\{available_gpu(?:_(?P<seed_n>\d+))?\})"
    r"|(?P<shell>\$\{[^}]*\})"
    r"|(?P<open>\{\{)"
    r"|(?P<close>\}\})"
    r"|\{(?P<ident>[A-Za-z_][A-Za-z0-9_]*)\}"
)

_IDENT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_reserved(key: str) -> bool:
    """A name gtui itself defines (so it cannot be a matrix key)."""
    return key in BUILTIN_NAMES or _GPU_N.fullmatch(key) is not None


def _builtin_value(
    ident: str, gpus: Sequence[int], name: str, attempt: int, port: int | None
) -> str | None:
    if ident == "gpu":
        return ",".join(str(g) for g in gpus)
    m = _GPU_N.fullmatch(ident)
    if m:
        i = int(m.group(1))
        return str(gpus[i]) if i < len(gpus) else None
    if ident == "n_gpus":
        return str(len(gpus))
    if ident == "port":
        return None if port is None else str(port)
    if ident == "name":
        return name
    if ident == "attempt":
        return str(attempt)
    return None


def substitute(
    cmd: str,
    *,
    gpus: Sequence[int],
    name: str,
    attempt: int,
    port: int | None,
    matrix: Mapping[str, str],
) -> str:
    """The command as it runs: placeholders replaced, ``{{``/``}}`` unescaped, the rest as is.

    A placeholder without a value (``{gpu3}`` on a 2-GPU job, ``{port}`` with no port) is left as
    written; the queue file loader already refuses the first case.
    """

    def repl(m: re.Match[str]) -> str:
        if m.group("seed") is not None:
            n = m.group("seed_n")
            value = _builtin_value("gpu" if n is None else f"gpu{n}", gpus, name, attempt, port)
            return m.group(0) if value is None else value
        if m.group("shell") is not None:
            return m.group(0)
        if m.group("open") is not None:
            return "{"
        if m.group("close") is not None:
            return "}"
        ident = m.group("ident")
        if ident in matrix:
            return str(matrix[ident])
        value = _builtin_value(ident, gpus, name, attempt, port)
        return m.group(0) if value is None else value

    return _TOKEN.sub(repl, cmd)


def substitute_matrix(text: str, matrix: Mapping[str, str], *, escape: bool = True) -> str:
    """Replace only ``{key}`` of the matrix, keeping every escape and other placeholder intact.

    Used when a ``matrix`` entry is expanded at load time: the result still goes through
    :func:`substitute` when the job starts, so braces inside a value are escaped (``escape``)
    to reach the command unchanged.
    """

    def repl(m: re.Match[str]) -> str:
        ident = m.group("ident")
        if ident is None or ident not in matrix:
            return m.group(0)
        value = str(matrix[ident])
        return value.replace("{", "{{").replace("}", "}}") if escape else value

    return _TOKEN.sub(repl, text)


def _no_change(*_: object) -> NoReturn:
    raise TypeError("placeholders_used's empty set is shared: make a set of your own")


class _NoNames(set[str]):
    """The one empty set :func:`placeholders_used` gives every command without a brace: a
    queue file's load asks it of every job and holds the answers until the load ends (216
    bytes each: 21 MB of the load's peak at 100,000 jobs). Its operators (``-``, ``|``,
    ``union``) give new plain sets; a change in place is refused."""

    __slots__ = ()
    add = discard = remove = pop = clear = update = _no_change
    difference_update = intersection_update = symmetric_difference_update = _no_change
    __ior__ = __iand__ = __isub__ = __ixor__ = _no_change

    def __hash__(self) -> int:  # type: ignore[override]
        return 0


_NO_NAMES: set[str] = _NoNames()


def placeholders_used(cmd: str) -> set[str]:
    """The placeholder names a command uses, seed forms normalised (``${available_gpu_1}`` ->
    ``gpu1``). Every ``{identifier}`` outside an escape counts, so matrix keys and unknown names
    appear too; the engine asks ``"port" in placeholders_used(cmd)`` before allocating a port.
    Read-only: a command without any gets one shared empty set."""
    if "{" not in cmd:
        return _NO_NAMES  # every form has a brace
    if "$" not in cmd and "{{" not in cmd and "}}" not in cmd:
        # only the {identifier} form can be there: a pattern that starts with its brace is
        # searched for much faster than the alternation (most commands are done here)
        return set(_IDENT.findall(cmd))
    used: set[str] = set()
    # findall's tuples (one per token, its groups in order) cost less than Match objects; a
    # queue file load asks this of every job
    for seed, seed_n, _shell, _open, _close, ident in _TOKEN.findall(cmd):
        if ident:
            used.add(ident)
        elif seed:
            used.add(f"gpu{seed_n}" if seed_n else "gpu")
    return used


def gpu_indices_used(cmd: str) -> set[int]:
    """The N of every ``{gpuN}`` / ``${available_gpu_N}`` in ``cmd`` (to check it against gpus)."""
    return gpu_indices_in(placeholders_used(cmd))


def gpu_indices_in(used: set[str]) -> set[int]:
    """The N of every ``gpuN`` among placeholder names (from :func:`placeholders_used`)."""
    out: set[int] = set()
    for ident in used:
        if ident.startswith("gpu"):
            m = _GPU_N.fullmatch(ident)
            if m:
                out.add(int(m.group(1)))
    return out
