"""Job names on the command line: exact names, globs, and a sweep's base name.

Every command that takes job names (kill, pause, resume, retry, rm, wait, log, follow, move,
edit) expands them here, against the jobs the queue has now (as the running scheduler, or the
saved state, has them):

- a name the queue has is that job;
- a word with ``*``, ``?`` or ``[`` is a glob (fnmatch, case-sensitive) over the job names;
- a matrix entry's base name stands for all its jobs: the name its jobs share before their
  matrix suffix (``sweep`` for ``sweep-lr=0.1``, ``sweep-lr=0.01``), or the ``name`` as
  written in the file (``train-{ds}``), or that name's part before its first placeholder
  (``train`` for ``train-{ds}``), as ``after`` reads it;
- a group's name (``group = "NAME"``, or a matrix entry's own group) stands for its jobs.

A pattern or base that matches nothing is refused (exit 2), with the closest name; one that
matches says how many jobs it took.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from gtui.core.errors import GtuiError, did_you_mean
from gtui.core.model import JobSpec
from gtui.core.paths import QueuePaths
from gtui.core.queue.queuefile import QueueReader, load_queue, read_document, read_queue_text

GLOB_CHARS = "*?["
_NAME_BAD_TAIL = "-_.=+:@"


def is_pattern(word: str) -> bool:
    return any(c in word for c in GLOB_CHARS)


@dataclass
class Expanded:
    """The names a command acts on (in the order given; a pattern's in queue order), and what
    each pattern became."""

    names: list[str]
    patterns: dict[str, list[str]] = field(default_factory=dict)  # glob or base -> its jobs

    def note(self) -> None:
        """Say on stderr how many jobs each pattern matched."""
        for word, matched in self.patterns.items():
            n = len(matched)
            more = f" and {n - 5} more" if n > 5 else ""
            shown = ", ".join(matched[:5]) + more
            print(f"{word}: {n} job{'s' if n != 1 else ''} ({shown})", file=sys.stderr)


def _suffix(job: JobSpec) -> str:
    from gtui.core.queue.queuefile import _name_safe

    return "".join(f"-{k}={_name_safe(v)}" for k, v in job.matrix.items())


def sweep_bases(specs: Sequence[JobSpec], queue_text: str | None = None) -> dict[str, list[str]]:
    """Base name -> the jobs of the matrix entry (or entries) it names; a group's name -> the
    jobs of that group."""
    entries: dict[int, list[JobSpec]] = {}
    groups: dict[str, list[JobSpec]] = {}
    for job in specs:
        if job.matrix:
            entries.setdefault(job.entry, []).append(job)
        if job.group is not None:
            groups.setdefault(job.group, []).append(job)
    raw: list[object] = []
    if queue_text is not None:
        try:  # the queue file's own reader: the tables as a load reads them
            data = read_document(queue_text, "<queue>").data.get("jobs")
            raw = data if isinstance(data, list) else []
        except GtuiError:
            raw = []
    out: dict[str, list[str]] = {}

    def add(base: str, jobs: list[JobSpec]) -> None:
        if base:
            names = out.setdefault(base, [])
            names.extend(j.name for j in jobs if j.name not in names)

    for group, jobs in groups.items():
        add(group, jobs)
    for entry, jobs in entries.items():
        stripped = set()
        for job in jobs:
            sfx = _suffix(job)
            if job.name.endswith(sfx) and len(job.name) > len(sfx):
                stripped.add(job.name[: -len(sfx)])
        if len(stripped) == 1:
            add(stripped.pop(), jobs)
        table = raw[entry] if entry < len(raw) else None
        written = table.get("name") if isinstance(table, dict) else None
        if isinstance(written, str):
            add(written, jobs)
            if "{" in written:
                add(written.split("{", 1)[0].rstrip(_NAME_BAD_TAIL), jobs)
    return out


class JobNames:
    """The jobs of one queue, for expanding the words of a command line."""

    def __init__(
        self,
        paths: QueuePaths,
        names: Sequence[str],
        specs: Sequence[JobSpec] | None = None,
    ) -> None:
        self.paths = paths
        self.names = list(names)
        self._specs = specs
        self._bases: dict[str, list[str]] | None = None
        # The command's reader: an edit of the file that follows reuses the parse made here.
        self.reader = QueueReader()

    @classmethod
    def of_status(cls, paths: QueuePaths, status: dict[str, object]) -> JobNames:
        jobs = status.get("jobs")
        names = [str(j["name"]) for j in jobs] if isinstance(jobs, list) else []
        return cls(paths, names)

    def bases(self) -> dict[str, list[str]]:
        if self._bases is None:
            try:
                text = read_queue_text(self.paths.queue)
                if self._specs is None:
                    self._specs = load_queue(self.paths.queue, text=text, reader=self.reader).jobs
                self._bases = sweep_bases(self._specs, text)
            except (GtuiError, OSError):
                self._bases = {}  # a broken file: exact names and globs still work
        return self._bases

    def expand(self, words: Sequence[str], *, strict: bool = True) -> Expanded:
        """Every word as names (module docstring); GtuiError (exit 2) for one that matches
        nothing. A name given twice is taken once. ``strict=False``: a word that is neither a
        pattern nor a base is passed on as it is, for the command's own check to refuse by
        name (the scheduler knows jobs a file being saved may not have yet)."""
        known = set(self.names)
        out: dict[str, None] = {}
        patterns: dict[str, list[str]] = {}
        for word in words:
            if word in known:
                out[word] = None
                continue
            if is_pattern(word):
                matched = [n for n in self.names if fnmatch.fnmatchcase(n, word)]
            else:
                base = self.bases().get(word)
                matched = [n for n in base if n in known] if base else []
            if not matched and not strict and not is_pattern(word):
                out[word] = None
                continue
            if not matched:
                raise GtuiError(self._nothing(word))
            patterns[word] = matched
            out.update(dict.fromkeys(matched))
        return Expanded(list(out), patterns)

    def specs(self) -> Sequence[JobSpec]:
        if self._specs is None:
            try:
                self._specs = load_queue(self.paths.queue, reader=self.reader).jobs
            except (GtuiError, OSError):
                self._specs = ()
        return self._specs

    def one(self, word: str, *, table: bool = False) -> str:
        """Exactly one job (log, follow, move, edit): a pattern must match one. ``table``: or
        several of one ``[[jobs]]`` table (a sweep, for move and edit), given by its first."""
        got = self.expand([word])
        if table and len(got.names) > 1:
            entries = {s.name: s.entry for s in self.specs()}
            if len({entries.get(n, -1 - i) for i, n in enumerate(got.names)}) == 1:
                return got.names[0]
        if len(got.names) != 1:
            shown = ", ".join(got.names[:5]) + (" ..." if len(got.names) > 5 else "")
            raise GtuiError(f"{word} matches {len(got.names)} jobs ({shown}); name one of them")
        return got.names[0]

    def _nothing(self, word: str) -> str:
        queue = self.paths.queue.name
        what = f"{word} matches no job" if is_pattern(word) else f"no job named {word!r}"
        hint = did_you_mean(word, [*self.names, *self.bases()])
        if hint:
            return f"{what} in {queue}{hint}"
        known = ", ".join(self.names[:8]) + (", ..." if len(self.names) > 8 else "")
        return f"{what} in {queue}" + (f" (jobs: {known})" if known else " (the queue is empty)")


def group_members(paths: QueuePaths, group: str) -> frozenset[str]:
    """The jobs of ``group`` in the queue file (``gtui status --group``); GtuiError (exit 2)
    naming the closest group when the file has none of that name."""
    try:
        specs = load_queue(paths.queue).jobs
    except OSError as e:
        raise GtuiError(f"{paths.queue}: {e.strerror or e}") from None
    members = frozenset(s.name for s in specs if s.group == group)
    if not members:
        groups = sorted({s.group for s in specs if s.group is not None})
        hint = did_you_mean(group, groups)
        known = f" (groups: {', '.join(groups[:8])})" if groups and not hint else ""
        raise GtuiError(f"no group named {group!r} in {paths.queue.name}{hint or known}")
    return members


__all__ = ["Expanded", "JobNames", "group_members", "is_pattern", "sweep_bases"]
