"""The data gtui reasons about: settings, job specifications, job states and run records.

These are plain dataclasses shared by the queue file reader, the placement policy, the engine, the
state store and every front end. Sizes are MiB (int), durations seconds (float).

Size: about 460 lines, as every layer reads these same types; split, each would import the
others' halves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from operator import attrgetter
from typing import Any, Literal, NoReturn

# The longest command a job may have, in UTF-8 bytes. The wrapper gets it in one environment
# string (GTUI_CMD=...) and hands it to bash as one argument; Linux caps each at
# MAX_ARG_STRLEN (128 KiB with its NUL). A KiB is left for what {gpu} / {gpus} become.
MAX_CMD_BYTES = 127 * 1024


def cmd_too_long(cmd: str) -> str | None:
    """Why ``cmd`` cannot be run (too long to pass to a process), or None: the queue file's
    check and the launch's, in the same words."""
    if len(cmd) * 4 <= MAX_CMD_BYTES:  # no need to encode a command that cannot be too long
        return None
    size = len(cmd.encode("utf-8", errors="surrogatepass"))
    if size <= MAX_CMD_BYTES:
        return None
    return (
        f"the command is {size:,} bytes; Linux passes at most {MAX_CMD_BYTES:,} to a job "
        "as one argument: put it in a script and run that"
    )


class Mode(StrEnum):
    """How our jobs may share GPUs (the eligibility rules of sched/policy.py)."""

    EXCLUSIVE = "exclusive"
    SHARED = "shared"
    PACK = "pack"


class Placement(StrEnum):
    """Which eligible GPU a job takes (the placement order of sched/policy.py).

    ``AUTO`` (the default): best fit in pack mode, most available memory first otherwise (the
    bash queue script's rule). benchmarks/simulate.py measured pack mode: best fit halves the
    GPU-hours the sample sweep holds, and on a mixed workload with other users it shortened the
    makespan in 9 of 10 runs (median -3.4 %); see docs/benchmarks.md.
    """

    AUTO = "auto"
    MOST_AVAILABLE = "most_available"
    BEST_FIT = "best_fit"


class JobState(StrEnum):
    """A job's life."""

    QUEUED = "queued"
    HELD = "held"
    RUNNING = "running"
    SUSPENDED = "suspended"
    DONE = "done"
    FAILED = "failed"
    KILLED = "killed"
    BLOCKED = "blocked"
    # It ended, but how is not known: its exit status could not be read (an empty status file
    # after a full disk, while no scheduler ran). Never taken for a failure, never re-run
    # silently: the user looks at its log and retries it or not.
    UNKNOWN = "unknown"


class Cause(StrEnum):
    """Why a job's attempt was stopped through no fault of its own and it waits again
    (sched/requeue.py): shown as a waiting job's state word and as that attempt's state."""

    PREEMPTED = "preempted"  # stopped to make room for a waiting job of higher priority
    INTERRUPTED = "interrupted"  # the machine rebooted under it
    REQUEUED = "requeued"  # it exited with its requeue_exit code
    GPU_FAULT = "gpu_fault"  # the health watch took its GPU out under it


CAUSES = frozenset(c.value for c in Cause)
# Attempts ended by these lost their GPU-hours (`gtui report`); a requeue_exit was asked for.
LOST_CAUSES = frozenset({Cause.PREEMPTED.value, Cause.INTERRUPTED.value, Cause.GPU_FAULT.value})

WAITING_STATES = frozenset({JobState.QUEUED, JobState.HELD})
ACTIVE_STATES = frozenset({JobState.RUNNING, JobState.SUSPENDED})
FINAL_STATES = frozenset(
    {JobState.DONE, JobState.FAILED, JobState.KILLED, JobState.BLOCKED, JobState.UNKNOWN}
)


@dataclass(frozen=True)
class DiagnosisRule:
    """One row of the diagnosis table: a regex on the log's tail and/or exit codes / signals."""

    kind: str
    hint: str
    pattern: str | None = None  # a Python regex, matched case-insensitively line by line
    exit_codes: tuple[int, ...] = ()
    signals: tuple[int, ...] = ()


NOTIFY_EVENTS = ("end", "failure", "queue_done")


@dataclass(frozen=True)
class Notify:
    """``[notify]`` of a queue file: how the user hears that jobs ended.

    ``on``: which events: ``end`` (every job's end: done, failed, killed), ``failure`` (a job
    failed, retries spent), ``queue_done`` (nothing runs and nothing more can start).
    ``command`` runs through ``bash -c`` with the facts in its environment (GTUI_JOB_NAME, ...);
    ``apprise`` lists Apprise URLs (the optional extra ``gtui[notify]``); ``bell`` / ``desktop``
    are the dashboard's terminal bell and OSC 9 desktop notification, off by default. Each
    delivery is cut off after ``timeout_s``.
    """

    command: str | None = None
    apprise: tuple[str, ...] = ()
    on: tuple[str, ...] = ("failure", "queue_done")
    timeout_s: float = 30.0
    bell: bool = False
    desktop: bool = False


@dataclass(frozen=True)
class GroupRule:
    """``[groups.NAME]`` of a queue file: the limits of the jobs whose ``group`` is NAME.

    ``max_parallel``: at most this many of them run at once (0: no limit of their own);
    ``priority``: added to each of its jobs' own ``priority`` when the policy ranks them."""

    name: str
    max_parallel: int = 0
    priority: int = 0


@dataclass(frozen=True)
class Resume:
    """How a job is stopped when the stop is not its fault, and what brings it back
    (sched/requeue.py): ``preemptible`` lets a waiting job of higher priority stop it;
    ``signal`` (a number; SIGUSR1 by default) goes to its process group first, ``grace``
    seconds before SIGTERM / SIGKILL; ``warn_before_s`` sends that signal so long before its
    ``timeout``; exiting with ``requeue_exit`` queues it again with no retry spent."""

    preemptible: bool = False
    signal: int = 10  # SIGUSR1
    grace_s: float = 120.0
    warn_before_s: float | None = None
    requeue_exit: int | None = None


NO_RESUME = Resume()


@dataclass(frozen=True)
class Settings:
    """``[settings]`` of a queue file, with their defaults."""

    gpus: Literal["all"] | tuple[int, ...] = "all"
    exclude: tuple[int, ...] = ()
    reserve: int = 0
    # "strict": at least `reserve` eligible GPUs stay free; "seed": the bash script's rule,
    # which takes one more when exactly `reserve` are free.
    reserve_rule: Literal["strict", "seed"] = "strict"
    mode: Mode = Mode.SHARED
    placement: Placement = Placement.AUTO
    max_parallel: int = 0
    retries: int = 0
    oom_grow: float = 1.25
    poll_s: float = 2.0
    kill_grace_s: float = 10.0
    log_dir: str = "logs"
    isolate: bool = True
    on_failure: Literal["continue", "pause"] = "continue"
    env: dict[str, str] = field(default_factory=dict)
    starve_after_s: float = 600.0
    multi_gpu_first: bool = False
    fake_gpus: str | None = None
    # Host resources (gtui.core.gpus.host): the defaults of each job's ``cpus`` / ``ram``
    # (None: a job asks nothing and is not counted), a simulated host "16c/64G", and whether
    # each job is also limited to what it asked (cgroup v2 through systemd-run).
    cpus: int | None = None
    ram_mib: int | None = None
    ram_auto: bool = False
    fake_host: str | None = None
    enforce: bool = False
    diagnose: tuple[DiagnosisRule, ...] = ()
    # Publish this queue's claims and count other users' (gpus/claims.py).
    neighbours: bool = True
    notify: Notify = field(default_factory=Notify)  # the [notify] section
    # [cluster]: where jobs run. "local" (this machine) or "ray" (a Ray cluster at
    # ``cluster_address``); ``cluster_gpus`` / ``cluster_exclude`` name nodes ("node2") or one
    # node's GPU ("node2:3"), read by the placement policy against each GPU's node; written in
    # [cluster] or, beside numbers, in [settings] gpus / exclude / reserve.
    cluster_backend: Literal["local", "ray"] = "local"
    cluster_address: str = "auto"
    cluster_gpus: tuple[str, ...] = ()
    cluster_exclude: tuple[str, ...] = ()
    cluster_reserve: tuple[tuple[str, int], ...] = ()  # (node, k): k of its GPUs kept free
    # GPUs out of placement by the pool's own numbers (the quarantine's, never the file's): on
    # a cluster ``exclude = [1]`` is GPU 1 of every node, a quarantined GPU one GPU of one node.
    pool_exclude: tuple[int, ...] = ()
    # Shell text run before each command (a job's own replaces it); a KEY=VALUE file per start
    setup: str | None = None
    env_file: str | None = None
    groups: tuple[GroupRule, ...] = ()  # the [groups.NAME] tables, in file order
    health_recheck_s: float | None = None  # a quarantined GPU back once clean this long
    # The queue's preemptible / signal / grace / requeue_exit: a job's own keys override them.
    resume: Resume = NO_RESUME
    # A scheduler that finds the machine booted again since its jobs ran queues them again.
    requeue_on_reboot: bool = True
    # What a kWh of the GPUs' energy costs: grams of CO2 and money (`gtui report`); None: unsaid.
    co2_g_per_kwh: float | None = None
    price_per_kwh: float | None = None


def _shared_empty(*_: object, **__: object) -> NoReturn:
    raise TypeError(
        "the shared empty default of a job's spec or record cannot change: assign a new one"
    )


class EmptyDict(dict[str, str]):
    """The one empty ``env`` / ``matrix`` every job without one shares (:data:`NO_STRINGS`).

    A dict (JSON, ``dict(...)``, ``==`` and ``**`` take it as one) that refuses every change:
    shared by 100,000 specs, a change to it would reach them all. 128 bytes a job were two
    empty dicts of their own."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _shared_empty
    clear = pop = popitem = setdefault = update = _shared_empty

    def __hash__(self) -> int:  # type: ignore[override]  # immutable: hashable, a default
        return 0

    def __reduce__(self) -> tuple[Any, ...]:
        return _no_strings, ()


class EmptyList(list[Any]):
    """The one empty ``warnings`` / ``peak_gpu_mib`` every record without any shares
    (:data:`NO_ITEMS`): a list that refuses every change in place. Code that adds to a
    record's list assigns a new one (``rec.warnings = [*rec.warnings, w]``). 112 bytes a
    waiting job were two empty lists of its own."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _shared_empty
    append = extend = insert = remove = pop = clear = sort = reverse = _shared_empty

    def __hash__(self) -> int:  # type: ignore[override]
        return 0

    def __reduce__(self) -> tuple[Any, ...]:
        return _no_items, ()


NO_STRINGS: dict[str, str] = EmptyDict()
NO_ITEMS: list[Any] = EmptyList()


def _no_strings() -> dict[str, str]:
    return NO_STRINGS


def _no_items() -> list[Any]:
    return NO_ITEMS


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job as the queue file declares it, after ``matrix`` expansion.

    ``cmd`` still holds its placeholders; the engine substitutes them at start.

    A 100,000-job sweep keeps 100,000 of these: slots (no instance dict) and one shared empty
    ``env`` / ``matrix`` (an empty one given is swapped for it) keep each at ~150 bytes.
    """

    name: str
    cmd: str
    gpus: int = 1
    mem_mib: int | None = None  # per GPU; None = the job needs its GPUs to itself
    priority: int = 0
    after: tuple[str, ...] = ()
    # mem = "auto": the request comes from its runs' peaks (state/usage.py);
    # mem_mib is then None, the first run's whole GPU.
    mem_auto: bool = False
    retries: int = 0  # already resolved against settings.retries; -1 = until it succeeds
    timeout_s: float | None = None
    cwd: str = "."
    env: dict[str, str] = NO_STRINGS
    matrix: dict[str, str] = NO_STRINGS  # this job's matrix values
    isolate: bool | None = None  # None: the queue's `isolate` setting
    line: int = 0  # where it was declared in the queue file (for messages)
    entry: int = 0  # index of its [[jobs]] table in the file (a matrix entry yields several jobs)
    # Host cores and memory it asks (None: not counted); ram = "auto": from recorded host peaks
    cpus: int | None = None
    ram_mib: int | None = None
    ram_auto: bool = False
    group: str | None = None  # its group's name (a matrix entry's jobs: the entry's, by default)
    setup: str | None = None  # None: the queue's `setup` setting
    env_file: str | None = None  # None: the queue's `env_file` setting
    resume: Resume | None = (
        None  # its own preemptible / signal / grace / requeue_exit; None: the queue's
    )
    sweep: str = ""  # a matrix job's entry name as written (its sweep's name); "" without matrix

    def __post_init__(self) -> None:
        if not self.env and self.env is not NO_STRINGS:
            object.__setattr__(self, "env", NO_STRINGS)
        if not self.matrix and self.matrix is not NO_STRINGS:
            object.__setattr__(self, "matrix", NO_STRINGS)

    @classmethod
    def make(
        cls,
        name: str,
        cmd: str,
        gpus: int,
        mem_mib: int | None,
        priority: int,
        after: tuple[str, ...],
        mem_auto: bool,
        retries: int,
        timeout_s: float | None,
        cwd: str,
        env: dict[str, str],
        matrix: dict[str, str],
        isolate: bool | None,
        line: int,
        entry: int,
        cpus: int | None = None,
        ram_mib: int | None = None,
        ram_auto: bool = False,
        group: str | None = None,
        setup: str | None = None,
        env_file: str | None = None,
        resume: Resume | None = None,
        sweep: str = "",
    ) -> JobSpec:
        """``JobSpec(...)`` with every field given in order, filled through its slots: the
        frozen ``__init__`` sets each field through ``object.__setattr__`` and runs
        ``__post_init__``, twice the time of this loop over a 100,000-job file (measured:
        constructor 2.0 s, this 1.3 s, per 100k under load). Equal to the constructor's
        (tests/core/sched/test_shared_defaults.py)."""
        spec = object.__new__(cls)
        values = (
            name, cmd, gpus, mem_mib, priority, after, mem_auto, retries,
            timeout_s, cwd, env or NO_STRINGS, matrix or NO_STRINGS, isolate, line, entry,
            cpus, ram_mib, ram_auto,
            group, setup, env_file, resume, sweep,
        )  # fmt: skip
        for set_field, value in zip(_SPEC_SETTERS, values, strict=True):
            set_field(spec, value)
        return spec


# Each JobSpec field's slot setter, in field order, for JobSpec.make (a frozen class refuses
# plain assignment).
_SPEC_SETTERS: tuple[Callable[[JobSpec, Any], None], ...] = tuple(
    JobSpec.__dict__[f.name].__set__ for f in fields(JobSpec)
)


@dataclass(frozen=True)
class Diagnosis:
    """Why a job failed: a kind, the matching log line and a hint a person can act on."""

    kind: str
    line: str
    hint: str


@dataclass(slots=True)
class JobRecord:
    """A job's run state, owned by the engine and persisted by the store.

    Slots, and one shared empty ``warnings`` / ``peak_gpu_mib`` (:data:`NO_ITEMS`, which
    refuses changes in place: add to them by assigning a new list): a waiting job's record is
    ~280 bytes, 100,000 of them in a long sweep."""

    name: str
    state: JobState = JobState.QUEUED
    attempt: int = 0  # attempts started so far (log names use it; never goes back)
    first_attempt: int = 1  # where the current retry budget began (a manual retry resets it)
    gpus: tuple[int, ...] = ()  # assigned physical indices while running / of the last attempt
    mem_mib: int | None = None  # the request in force (grows after a CUDA OOM)
    pid: int | None = None
    create_time: float | None = None  # psutil create_time of pid: identifies it across restarts
    exit_code: int | None = None
    signal: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    log: str | None = None
    reason: str = ""  # why it waits, in words
    reason_at: float | None = None
    # Set when this job is the edit of a job still running under its old, derived name: it
    # waits for that run, and takes over from its next attempt.
    after_edit_of: str | None = None
    # Retry back-off: failures in a row that each ran under a minute, and when the
    # next try may start.
    quick_fails: int = 0
    retry_at: float | None = None  # when that reason was last given (saved at most every 30 s)
    diagnosis: Diagnosis | None = None
    warnings: list[str] = NO_ITEMS
    queued_since: float = field(default_factory=time.time)
    peak_mib: int | None = None  # highest GPU memory seen for this attempt (per GPU)
    # This attempt's peak on each of its GPUs (in ``gpus`` order; 0: none seen) and
    # the peak resident host memory of its processes (None: not measured).
    peak_gpu_mib: list[int] = NO_ITEMS
    host_peak_mib: int | None = None
    port: int | None = None
    status_file: str | None = None  # where the wrapper writes this attempt's exit status
    token: str | None = None  # set in the job's environment (GTUI_TOKEN) to find it after a crash
    node: str | None = None  # the cluster node it runs / ran on (Ray executor); None: this machine
    # Stops that were not its fault (sched/requeue.py): the last one's cause ("preempted",
    # "interrupted", "requeued"; None once it ends otherwise), who caused it and when, how
    # many preemptions it has had and how many times it asked to be queued again.
    requeued_as: str | None = None
    preempted_by: str | None = None
    preempted_at: float | None = None
    preemptions: int = 0
    requeues: int = 0
    # Set while its run is being stopped to make room for that job: saved before the first
    # signal, so a scheduler that restarts mid-stop goes on with it instead of failing it.
    preempt_for: str | None = None
    # Whether that stop's signal was (about to be) sent, saved before it: a run that ends done
    # before its signal finished by itself and is done, not preempted.
    preempt_signalled: bool = False
    boot_id: str | None = None  # the machine's boot id when this attempt started
    # This attempt's experiment-tracker run links, (tracker, url), the first of each tracker
    # its log printed (sched/linkwatch.py); the shared empty list until one is found.
    links: list[tuple[str, str]] = NO_ITEMS

    @property
    def waiting(self) -> bool:
        return self.state in WAITING_STATES

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(JobRecord))


_RECORD_VALUES = attrgetter(*RECORD_FIELDS)


def copy_record(record: JobRecord) -> JobRecord:
    """A shallow copy of ``record`` (its lists shared: they are replaced, never changed in
    place): the constructor given every field's value in order."""
    return JobRecord(*_RECORD_VALUES(record))
