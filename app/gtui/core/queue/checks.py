"""The checks across jobs: ``after`` resolved to names and free of cycles, each job against
the pool of GPUs, and the warnings for what is allowed but probably not meant.

Without a machine to check against, only the pool the file itself fixes (a list in
``settings.gpus``) is checked; with one, also that listed GPUs exist, that ``gpus`` fits the
pool and the reserve, and that ``mem`` fits on enough GPUs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gtui.core.model import JobSpec, Mode, Settings
from gtui.core.queue.entries import expand_entry
from gtui.core.queue.placeholders import is_reserved, placeholders_used
from gtui.core.queue.where import Where
from gtui.core.reserve import reserve_allows
from gtui.core.units import format_mib

_CVD_ASSIGN = re.compile(
    r"CUDA_VISIBLE_DEVICES=[\"']?(?:\\?\$\{available_gpu(?:_\d+)?\}|\{gpu\d*\}|,)+[\"']?"
)


def isolated(job: JobSpec, settings: Settings) -> bool:
    """Whether ``job`` runs with CUDA_VISIBLE_DEVICES set to its GPUs: its own
    ``isolate`` if it has one, else the queue's. A CPU job is always isolated (it sees none)."""
    if job.gpus == 0:
        return True
    return settings.isolate if job.isolate is None else job.isolate


def passes_gpu_numbers(cmd: str) -> bool:
    """Whether ``cmd`` hands GPU numbers to the program itself (``--gpu {gpu}``), rather than
    only through ``CUDA_VISIBLE_DEVICES={gpu}``. With isolation those numbers do not match
    what CUDA shows the job (its GPUs numbered from 0)."""
    return _passes_gpu_numbers(cmd, None)


def _passes_gpu_numbers(cmd: str, used: set[str] | None) -> bool:
    """:func:`passes_gpu_numbers`, given ``placeholders_used(cmd)`` when it is known."""
    if "CUDA_VISIBLE_DEVICES" in cmd or used is None:
        used = placeholders_used(_CVD_ASSIGN.sub("", cmd))
    return any(u == "gpu" or re.fullmatch(r"gpu\d+", u) for u in used if u.startswith("gpu"))


def job_warnings(
    job: JobSpec, w: Where, settings: Settings, used: set[str] | None = None
) -> list[str]:
    """What is allowed in ``job`` but probably not meant. ``used`` is
    ``placeholders_used(job.cmd)`` if the caller has it (a load asks for every job's)."""
    if used is None:
        used = placeholders_used(job.cmd)
    out: list[str] = []
    # The line of `cmd` is read only for a warning: finding it costs more than the checks.
    where = "{where}"
    for ident in sorted(used):
        if is_reserved(ident) or ident in job.matrix:
            continue
        out.append(
            f"{where}: cmd: {{{ident}}} is not a placeholder (no matrix key `{ident}`); it reaches "
            f"the shell as written (write {{{{{ident}}}}} to say so)"
        )
    if job.gpus == 0 and used & {"gpu", "gpu0"}:
        out.append(f"{where}: cmd: job {job.name} uses {{gpu}} but gpus = 0: it will be empty")
    elif job.gpus and isolated(job, settings) and _passes_gpu_numbers(job.cmd, used):
        out.append(
            f"{where}: cmd: {{gpu}} gives physical GPU numbers, but with isolate = true the job "
            f"sees its GPUs as 0..{job.gpus - 1}: pass those, or set isolate = false on this job"
        )
    if out:
        at = f"{w.path}:{w.line_of('cmd')}" if w.line_of("cmd") else w.path
        out = [m.replace(where, at, 1) for m in out]
    return out


def _pool_limits(settings: Settings, pool: Sequence[int | None] | None) -> int | None:
    """How many GPUs the pool has, if known (a listed ``settings.gpus`` fixes an upper bound)."""
    if pool is not None:
        return len(pool)
    if isinstance(settings.gpus, tuple) and not settings.cluster_gpus:
        return len(set(settings.gpus) - set(settings.exclude))
    return None


class PoolCheck:
    """Can each job ever get its GPUs and memory from the pool? Raises the message saying why
    not. The pool's facts (its size, what the reserve leaves, the largest GPU, how many GPUs
    have a given memory) are worked out once for a load's thousands of jobs."""

    __slots__ = ("_fitting", "known", "largest", "most", "pool", "settings", "size")

    def __init__(self, settings: Settings, pool: Sequence[int | None] | None) -> None:
        self.settings = settings
        self.pool = pool
        self.size = _pool_limits(settings, pool)
        self.most = self.size  # what the reserve lets one job take (the policy's own rule)
        if self.size is not None and settings.mode != Mode.PACK and settings.reserve:
            self.most = reserve_allows(self.size, settings.reserve, settings.reserve_rule)
        known = [t for t in pool if t is not None] if pool is not None else []
        self.largest = max(known) if known else None
        self._fitting: dict[int, int] = {}  # mem_mib -> how many GPUs of the pool have that much

    def __call__(self, job: JobSpec, w: Where) -> None:
        gpus = job.gpus
        if gpus == 0:
            return
        size, most = self.size, self.most
        if size is not None and gpus > size:
            source = "the pool" if self.pool is not None else "settings gpus (minus exclude)"
            raise w.error(
                f"job {job.name} needs {gpus} GPU{'s' if gpus > 1 else ''} but {source} "
                f"has {size}; lower gpus or widen settings gpus / exclude",
                "gpus",
            )
        if most is not None and gpus > most:
            raise w.error(
                f"job {job.name} needs {gpus} GPUs but with reserve = {self.settings.reserve} "
                f"at most {most} of the {size} GPUs in the pool can be taken; lower gpus or "
                "reserve",
                "gpus",
            )
        mem = job.mem_mib
        if self.pool is None or mem is None or self.largest is None:
            return
        if mem > self.largest:
            raise w.error(
                f"job {job.name} asks {format_mib(mem)} per GPU, more than any GPU has "
                f"(largest: {format_mib(self.largest)}); lower mem",
                "mem",
            )
        fitting = self._fitting.get(mem)
        if fitting is None:
            fitting = self._fitting[mem] = sum(1 for t in self.pool if t is None or t >= mem)
        if fitting < gpus:
            have = f"{fitting} GPUs of the pool have" if fitting != 1 else "1 GPU of the pool has"
            raise w.error(
                f"job {job.name} needs {gpus} GPUs with {format_mib(mem)} each but only "
                f"{have} that much; lower mem or gpus",
                "mem",
            )


def resolve_after(
    job: JobSpec,
    names: Collection[str],
    templates: Mapping[str, Sequence[str]],
    w: Where,
) -> JobSpec:
    out: list[str] = []
    for a in job.after:
        if a in names:
            targets: Sequence[str] = [a]
        elif a in templates:
            targets = templates[a]
        else:
            close = difflib.get_close_matches(a, list(names) + list(templates), n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise w.error(f"no job named `{a}`{hint}", "after")
        for t in targets:
            if t == job.name:
                raise w.error(f"job {job.name} cannot wait for itself", "after")
            if t not in out:
                out.append(t)
    if tuple(out) == job.after:
        return job
    return replace(job, after=tuple(out))


def find_cycle(jobs: Sequence[JobSpec]) -> list[str] | None:
    """A cycle in ``after`` (as a list of names, first == last), or None."""
    # a job waiting for nothing is in no cycle: left out of the walk (most jobs are)
    graph = {j.name: j.after for j in jobs if j.after}
    color: dict[str, int] = {}
    for start in graph:
        if color.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                color[node] = 1
                path.append(node)
            deps = graph.get(node, ())
            if i < len(deps):
                stack.append((node, i + 1))
                nxt = deps[i]
                if color.get(nxt) == 1:
                    return [*path[path.index(nxt) :], nxt]
                if not color.get(nxt) and nxt in graph:
                    stack.append((nxt, 0))
            else:
                color[node] = 2
                path.pop()
    return None


def job_from_fields(
    fields: Mapping[str, Any],
    settings: Settings,
    path: str | Path,
    line: int | None,
    existing_names: Collection[str],
    *,
    pool: Sequence[int | None] | None = None,
) -> list[JobSpec]:
    """Check one new job (a ``[[jobs]]`` table's fields) exactly as the queue file would.

    For the dashboard's add form and ``gtui add``: ``existing_names`` are the queue's jobs (its
    ``after`` may only name those; its name(s) must differ from them). Returns the job, or the
    jobs its ``matrix`` expands to. Raises :class:`QueueFileError`.
    """
    w = Where(str(path), line, {}, "[[jobs]]")
    exp = expand_entry(fields, settings, w, entry=-1)
    mine: set[str] = set()
    for job in exp.jobs:
        if job.name in existing_names or job.name in mine:
            raise w.error(f"a job named `{job.name}` already exists; choose another name", "name")
        mine.add(job.name)
    jobs = [resolve_after(j, existing_names, {}, w) for j in exp.jobs]
    check_pool = PoolCheck(settings, pool)
    for job in jobs:
        check_pool(job, w)
    return jobs


# ---------------------------------------------------------------------------------------------
# the file


def check_new_entry(
    path: Path | str,
    fields: Mapping[str, Any],
    settings: Settings,
    known: Collection[str],
    entry: int,
    pool: Sequence[int | None] | None,
    line: int | None = None,
    keys: Mapping[str, int] | None = None,
) -> tuple[list[JobSpec], list[str]] | None:
    """One new [[jobs]] entry checked as a load of the whole file would check it, against the
    names the file already has: its jobs and warnings. Raises QueueFileError for a mistake;
    None when only a whole load can tell (its ``after`` names a matrix entry by its template).
    ``gtui add`` into a running 100,000-job queue takes this instead of three whole loads."""
    w = Where(str(path), line, keys or {}, "the new [[jobs]] entry" if keys is None else "[[jobs]]")
    exp = expand_entry(fields, settings, w, entry)
    new_names: set[str] = set()
    for job in exp.jobs:
        if job.name in known or job.name in new_names:
            raise w.error(f"`{job.name}` is already the name of a job; give it a distinct `name`")
        new_names.add(job.name)
    names = EitherNames(known, new_names)
    check_pool = PoolCheck(settings, pool)
    jobs: list[JobSpec] = []
    warnings: list[str] = list(exp.notes)
    for job in exp.jobs:
        if any(a not in names for a in job.after):
            return None  # a template or a typo: the whole load says which, with its hint
        resolved = resolve_after(job, names, {}, w)
        check_pool(resolved, w)
        warnings.extend(job_warnings(resolved, w, settings, exp.used))
        jobs.append(resolved)
    return jobs, warnings


class EitherNames(Collection[str]):
    """Two collections of names seen as one, without copying the 100,000 known ones."""

    def __init__(self, a: Collection[str], b: Collection[str]) -> None:
        self._a, self._b = a, b

    def __contains__(self, name: object) -> bool:
        return name in self._a or name in self._b

    def __iter__(self) -> Iterator[str]:
        yield from self._a
        yield from self._b

    def __len__(self) -> int:
        return len(self._a) + len(self._b)
