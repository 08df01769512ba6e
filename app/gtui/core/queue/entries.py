"""One ``[[jobs]]`` entry checked and expanded: its keys, its ``matrix`` and its jobs' names.

``matrix`` expands to one job per combination, the first key varying slowest and values in the
order written. ``{key}`` is replaced in ``name``, ``cmd``, ``after``, ``cwd`` and ``env`` values.
Keys the name does not use are appended as ``-key=value`` (in key order) so names stay unique;
characters a name cannot hold (``/``, spaces...) become ``_``. A CPU job (``gpus = 0``) cannot
declare ``mem``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

from gtui.core.model import NO_STRINGS, JobSpec, Settings, cmd_too_long
from gtui.core.queue.hostreq import cpus_value, ram_value
from gtui.core.queue.names import derive_name, name_problem, name_safe
from gtui.core.queue.placeholders import (
    gpu_indices_in,
    is_reserved,
    placeholders_used,
    substitute_matrix,
)
from gtui.core.queue.resumekeys import RESUME_KEYS, resume_value
from gtui.core.queue.schema import JOB_KEYS, JOB_KEYSET, MAX_JOBS_PER_ENTRY, SETTINGS_KEYS
from gtui.core.queue.values import (
    NUL_MESSAGE,
    Seen,
    bool_value,
    duration_value,
    env_value,
    int_value,
    scalar_text,
    size_value,
    str_value,
)
from gtui.core.queue.where import Where, check_keys, kind_of

_MATRIX_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Expanded:
    """One [[jobs]] entry, checked and expanded; ``after`` not yet resolved to names.

    (A plain class with slots: a load makes one per entry, and a frozen dataclass's
    construction cost a microsecond of each job's.)"""

    __slots__ = ("jobs", "notes", "template", "used", "where")

    def __init__(
        self,
        jobs: list[JobSpec],
        template: str | None,  # the matrix entry's name as written (for ``after``), if any
        where: Where,
        used: set[str] | None = None,  # placeholders_used of the only job's cmd (no matrix)
        notes: list[str] | None = None,  # the entry's own warnings (said once, not per job)
    ) -> None:
        self.jobs = jobs
        self.template = template
        self.where = where
        self.used = used
        self.notes = notes or []


def _matrix(w: Where, value: Any) -> list[dict[str, str]]:
    """A ``matrix`` table's combinations, the first key varying slowest."""
    if not isinstance(value, dict):
        raise w.error(
            f"expected a table such as {{ lr = [0.1, 0.01] }}, got {kind_of(value)}", "matrix"
        )
    if not value:
        raise w.error("an empty matrix expands to no job; remove it or give it keys", "matrix")
    keys: list[str] = []
    columns: list[list[str]] = []
    for key, values in value.items():
        if not _MATRIX_KEY.fullmatch(key):
            raise w.error(f"{key!r} cannot be a matrix key: use letters, digits and _", "matrix")
        if is_reserved(key):
            raise w.error(f"`{key}` is a placeholder gtui fills itself; rename the key", "matrix")
        if not isinstance(values, list) or not values:
            raise w.error(
                f"{key}: expected a non-empty list of values, e.g. {key} = [1, 2]", "matrix"
            )
        col = []
        for v in values:
            text = scalar_text(v)
            if text is None:
                raise w.error(
                    f"{key}: values must be strings or numbers, got {kind_of(v)}", "matrix"
                )
            if "\0" in text:
                raise w.error(f"{key}: {NUL_MESSAGE}", "matrix")
            col.append(text)
        keys.append(key)
        columns.append(col)
    total = 1
    for col in columns:
        total *= len(col)
    if total > MAX_JOBS_PER_ENTRY:
        raise w.error(f"expands to {total} jobs, more than {MAX_JOBS_PER_ENTRY}", "matrix")
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*columns)]


RESUME_KEYSET = frozenset(RESUME_KEYS)
_NO_MATRIX: tuple[dict[str, str], ...] = ({},)  # (never changed)


def expand_entry(
    fields: Mapping[str, Any], settings: Settings, w: Where, entry: int, seen: Seen | None = None
) -> Expanded:
    """One ``[[jobs]]`` table checked and expanded into its jobs (one per matrix combination).
    ``seen``: what the load already found valid (sizes, env names), shared by its entries."""
    if type(fields) is not dict and not isinstance(fields, Mapping):
        raise w.error(f"expected a table with at least `cmd`, got {kind_of(fields)}")
    if not JOB_KEYSET.issuperset(fields):
        check_keys(w, fields, JOB_KEYS, {"[settings]": SETTINGS_KEYS})
    if "cmd" not in fields:
        raise w.error('a job needs a `cmd`, e.g. cmd = "python train.py --gpu {gpu}"', "cmd")
    cmd = str_value(w, "cmd", fields["cmd"])
    too_long = cmd_too_long(cmd)
    if too_long:
        raise w.error(too_long, "cmd")
    raw_name = str_value(w, "name", fields["name"]) if "name" in fields else None
    gpus = int_value(w, "gpus", fields.get("gpus", 1), 0)
    mem_mib: int | None = None
    mem_auto = fields.get("mem") == "auto"  # from the runs' peaks
    if mem_auto and gpus == 0:
        raise w.error('a CPU job (gpus = 0) takes no GPU memory; remove mem = "auto"', "mem")
    if "mem" in fields and not mem_auto:
        mem_mib = size_value(w, "mem", fields["mem"], seen)
        if gpus == 0 and mem_mib:
            raise w.error(
                "a CPU job (gpus = 0) takes no GPU memory; remove `mem` or set gpus", "mem"
            )
        if gpus == 0:
            mem_mib = None
    # (a key left out takes its default without a check: most jobs leave most out)
    priority = int_value(w, "priority", fields["priority"]) if "priority" in fields else 0
    after_t: tuple[str, ...] = ()
    if "after" in fields:
        after_raw = fields["after"]
        if isinstance(after_raw, str):
            after_raw = [after_raw]
        if not isinstance(after_raw, list):
            raise w.error(
                f'expected a list of job names such as ["prep"], got {kind_of(after_raw)}', "after"
            )
        after_t = tuple(str_value(w, "after", a) for a in after_raw) if after_raw else ()
    retries = settings.retries
    if "retries" in fields:
        retries = int_value(w, "retries", fields["retries"], -1, " (-1 = until it succeeds)")
    timeout_s = (
        duration_value(w, "timeout", fields["timeout"], positive=True)
        if "timeout" in fields
        else None
    )
    cwd = str_value(w, "cwd", fields["cwd"]) if "cwd" in fields else "."
    env = env_value(w, "env", fields["env"], seen) if "env" in fields else {}
    isolate = bool_value(w, "isolate", fields["isolate"]) if "isolate" in fields else None
    cpus = cpus_value(w, fields["cpus"]) if "cpus" in fields else settings.cpus
    ram_mib, ram_auto = settings.ram_mib, settings.ram_auto
    if "ram" in fields:
        ram_mib, ram_auto = ram_value(w, fields["ram"], seen)
    group = group_name(w, fields["group"]) if "group" in fields else None
    # An empty `setup` is allowed: it turns the queue's setup off for this job.
    setup = str_value(w, "setup", fields["setup"], empty_ok=True) if "setup" in fields else None
    env_file = str_value(w, "env_file", fields["env_file"]) if "env_file" in fields else None
    resume = (
        resume_value(w, fields, settings.resume) if not RESUME_KEYSET.isdisjoint(fields) else None
    )

    used = placeholders_used(cmd)
    if used:
        top = max(gpu_indices_in(used), default=-1)
        if top >= gpus:
            have = f"{{gpu0}}..{{gpu{gpus - 1}}}" if gpus > 1 else ("{gpu0}" if gpus else "none")
            raise w.error(
                f"uses {{gpu{top}}} but the job has gpus = {gpus} (placeholders: {have})", "cmd"
            )

    combos = _matrix(w, fields["matrix"]) if "matrix" in fields else _NO_MATRIX
    if raw_name is not None and "{" in raw_name:
        stray = sorted(placeholders_used(raw_name) - set(combos[0]))
        if stray:
            keys = ", ".join(combos[0]) or "none"
            raise w.error(
                f"uses {{{stray[0]}}}, which is not a matrix key of this job (its keys: {keys})",
                "name",
            )
    base = raw_name if raw_name is not None else derive_name(cmd)
    if group is None and combos is not _NO_MATRIX:
        group = entry_group(base)
    jobs: list[JobSpec] = []
    if combos is _NO_MATRIX:  # nothing to substitute
        problem = name_problem(base)
        if problem:
            raise w.error(f"{problem} (got {base!r})", "name" if raw_name is not None else "cmd")
        job = JobSpec.make(  # the constructor's, a quarter of the load faster
            base, cmd, gpus, mem_mib, priority, after_t, mem_auto, retries, timeout_s, cwd,
            env, NO_STRINGS, isolate, w.line or 0, entry, cpus, ram_mib, ram_auto,
            group, setup, env_file, resume,
        )  # fmt: skip
        return Expanded(jobs=[job], template=None, where=w, used=used)
    for combo in combos:
        name = base
        if combo:
            safe = {k: name_safe(v) for k, v in combo.items()}
            name = substitute_matrix(base, safe, escape=False)
            unused = [k for k in combo if f"{{{k}}}" not in base]
            if unused:
                name += "".join(f"-{k}={safe[k]}" for k in unused)
        problem = name_problem(name)
        if problem:
            raise w.error(f"{problem} (got {name!r})", "name" if raw_name is not None else "cmd")
        jobs.append(
            JobSpec(
                name=name,
                cmd=substitute_matrix(cmd, combo) if combo else cmd,
                gpus=gpus,
                mem_mib=mem_mib,
                mem_auto=mem_auto,
                priority=priority,
                after=tuple(substitute_matrix(a, combo, escape=False) for a in after_t),
                retries=retries,
                timeout_s=timeout_s,
                cwd=substitute_matrix(cwd, combo, escape=False) if combo else cwd,
                env={k: substitute_matrix(v, combo, escape=False) for k, v in env.items()},
                matrix=dict(combo),
                isolate=isolate,
                line=w.line or 0,
                entry=entry,
                cpus=cpus,
                ram_mib=ram_mib,
                ram_auto=ram_auto,
                group=group,
                setup=setup,
                env_file=env_file,
                resume=resume,
                sweep=base if combo else "",
            )
        )
    notes = _unused_matrix_keys(w, combos[0], used, env, cwd)
    return Expanded(jobs=jobs, template=raw_name, where=w, notes=notes)


_NAME_BAD_TAIL = "-_.=+:@"


def entry_group(base: str) -> str:
    """The group a matrix entry's jobs form unless it names one: the entry's name as written
    up to its first placeholder (``sweep`` for ``sweep-{lr}``), or the whole name."""
    head = base.split("{", 1)[0].rstrip(_NAME_BAD_TAIL)
    return head if head and name_problem(head) is None else name_safe(base)


def group_name(w: Where, value: Any, key: str = "group") -> str:
    """A group's name, checked as a job's name is (commands take either)."""
    name = str_value(w, key, value)
    problem = name_problem(name)
    if problem:
        raise w.error(f"{problem.replace('a job name', 'a group name')} (got {name!r})", key)
    return name


def _unused_matrix_keys(
    w: Where, combo: dict[str, str], used: set[str], env: dict[str, str], cwd: str
) -> list[str]:
    """A matrix key that neither cmd, env nor cwd uses makes jobs that run the same command
    (only their names differ): a warning, once for the entry."""
    unused = [k for k in combo if k not in used]
    if unused and (env or "{" in cwd):
        elsewhere = placeholders_used(cwd).union(*(placeholders_used(v) for v in env.values()))
        unused = [k for k in unused if k not in elsewhere]
    if not unused:
        return []
    keys = ", ".join(f"`{k}`" for k in unused)
    verb = "is" if len(unused) == 1 else "are"
    line = w.line_of("matrix")
    at = f"{w.path}:{line}" if line else str(w.path)
    return [
        f"{at}: matrix: {keys} {verb} not used by cmd (nor env, cwd): its jobs run identical "
        f"commands; use {{{unused[0]}}} in cmd, or drop the key"
    ]
