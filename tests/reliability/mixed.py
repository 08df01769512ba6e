"""Mixed queues with known outcomes, and the checks that nothing was lost or run twice.

Shared by the crash tests (tests/reliability/test_crash.py) and the soak (``python -m soak``).
A queue is generated from a seed: jobs that succeed, fail, fail then succeed on a retry, exhaust
their retries, die by a signal, wait for another job (and run, or end blocked), take two GPUs, or
no GPU. Every job appends ``name attempt pid`` to a runs file when it starts and prints a marker
into its log, so the checks can prove, from the job's side, that each attempt ran exactly once
and that no log was overwritten. Final states, exit statuses and attempt counts are known in
advance from the job's kind alone, whatever happened to the scheduler in between.
"""

from __future__ import annotations

import glob
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from gtui.core.model import JobRecord
from gtui.core.paths import queue_paths
from gtui.core.state.store import Store

# The fault-injection points of app/gtui/core/sched/engine.py (_crash_point).
CRASH_POINTS = ("after_intent", "after_launch", "after_exit", "after_finish")


@dataclass(frozen=True)
class Expect:
    """What must be true of one job once the queue has run to the end."""

    name: str
    kind: str
    state: str
    exits: tuple[str, ...]  # the wrapper's status of each attempt: "exit 0", "signal 15", ...

    @property
    def attempts(self) -> int:
        return len(self.exits)


@dataclass
class Mixed:
    """A generated queue file and what each of its jobs must end as."""

    queue: Path
    runs: Path
    expect: dict[str, Expect]

    @property
    def log_dir(self) -> Path:
        return self.queue.parent / "logs"


def _sleep(rng: random.Random, lo: float, hi: float) -> str:
    return f"sleep {rng.uniform(lo, hi):.2f}"


def make_mixed(
    directory: Path,
    rng: random.Random,
    n_jobs: int = 12,
    *,
    sleep: tuple[float, float] = (0.05, 0.3),
    fake_gpus: str = "4x80G",
    poll: str = "0.2s",
    extra_settings: str = "",
) -> Mixed:
    """Write a queue of ``n_jobs`` jobs of mixed kinds into ``directory``."""
    runs = directory / "runs"
    runs.touch()
    head = (
        "[settings]\n"
        f'poll = "{poll}"\nkill_grace = "2s"\nfake_gpus = "{fake_gpus}"\nlog_dir = "logs"\n'
        f"{extra_settings}\n"
    )
    blocks: list[str] = []
    expect: dict[str, Expect] = {}
    done_names: list[str] = []
    failed_names: list[str] = []
    # Every kind at least once when there is room, then a random mix.
    kinds = ["ok", "fail", "retry", "exhaust", "signal", "dep", "blocked", "multi", "cpu"]
    plan = kinds[: min(n_jobs, len(kinds))]
    weights = [5, 2, 2, 1, 1, 2, 1, 2, 2]
    plan += rng.choices(kinds, weights=weights, k=max(0, n_jobs - len(plan)))
    for i, kind in enumerate(plan):
        name = f"{kind}-{i}"
        start = (
            f'echo "$GTUI_JOB $GTUI_ATTEMPT $$" >> {runs}; echo "marker $GTUI_JOB $GTUI_ATTEMPT"'
        )
        body = _sleep(rng, *sleep)
        gpus, mem, retries, after = 1, f"{rng.choice([5, 10, 20, 30])}G", 0, ""
        if kind == "ok":
            cmd, state, exits = f"{start}; {body}", "done", ["exit 0"]
        elif kind == "fail":
            code = rng.choice([1, 2, 3, 42])
            cmd, state, exits = f"{start}; {body}; exit {code}", "failed", [f"exit {code}"]
        elif kind == "retry":
            retries = rng.choice([1, 2])
            cmd = f'{start}; {body}; [ "$GTUI_ATTEMPT" -le {retries} ] && exit 5; exit 0'
            state, exits = "done", ["exit 5"] * retries + ["exit 0"]
        elif kind == "exhaust":
            retries = 1
            cmd, state, exits = f"{start}; {body}; exit 6", "failed", ["exit 6", "exit 6"]
        elif kind == "signal":
            cmd, state, exits = f"{start}; {body}; kill -TERM $$", "failed", ["signal 15"]
        elif kind == "dep":
            parents = [n for n in done_names if not n.startswith("dep")] or done_names
            if not parents:
                kind, cmd, state, exits = "ok", f"{start}; {body}", "done", ["exit 0"]
            else:
                after = rng.choice(parents)
                cmd, state, exits = f"{start}; {body}", "done", ["exit 0"]
        elif kind == "blocked":
            if not failed_names:
                kind, cmd, state, exits = "ok", f"{start}; {body}", "done", ["exit 0"]
            else:
                after = rng.choice(failed_names)
                cmd, state, exits = f"{start}; {body}", "blocked", []
        elif kind == "multi":
            gpus, mem = 2, f"{rng.choice([10, 30])}G"
            cmd, state, exits = f"{start}; {body}", "done", ["exit 0"]
        else:  # cpu
            gpus, mem = 0, ""
            cmd, state, exits = f"{start}; {body}", "done", ["exit 0"]
        lines = [
            "[[jobs]]",
            f'name = "{name}"',
            f"cmd = '{cmd}'",
            f"gpus = {gpus}",
        ]
        if mem:
            lines.append(f'mem = "{mem}"')
        if retries:
            lines.append(f"retries = {retries}")
        if after:
            lines.append(f'after = ["{after}"]')
        blocks.append("\n".join(lines) + "\n")
        expect[name] = Expect(name, kind, state, tuple(exits))
        if state == "done":
            done_names.append(name)
        elif state == "failed":
            failed_names.append(name)
    queue = directory / "q.toml"
    queue.write_text(head + "\n" + "\n".join(blocks))
    return Mixed(queue=queue, runs=runs, expect=expect)


# ---------------------------------------------------------------------------------------------
# running the real scheduler


def start_run(queue: Path, crash_at: str | None = None) -> subprocess.Popen[str]:
    """``gtui run QUEUE`` as a child process (optionally with a fault-injection point)."""
    env = dict(os.environ)
    env.pop("GTUI_CRASH_AT", None)
    if crash_at:
        env["GTUI_CRASH_AT"] = crash_at
    return subprocess.Popen(
        [sys.executable, "-m", "gtui", "run", str(queue)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def kill_after(proc: subprocess.Popen[str], delay: float, timeout: float = 120) -> str:
    """SIGKILL the scheduler ``delay`` seconds from now (if it still runs); its output."""
    try:
        out, _ = proc.communicate(timeout=delay)
        return out
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=timeout)
    return out


@dataclass
class CrashPlan:
    """How one crash run treats its scheduler: kills at random moments, then a clean run."""

    seed: int
    kills: list[tuple[float, str | None]] = field(default_factory=list)  # (delay, crash point)
    downtime: list[float] = field(default_factory=list)  # pause before each restart

    @classmethod
    def random(cls, seed: int) -> CrashPlan:
        rng = random.Random(seed * 7919 + 1)
        plan = cls(seed)
        for i in range(2 if rng.random() < 0.4 else 1):
            point = None
            if rng.random() < 0.3:
                point = f"{rng.choice(CRASH_POINTS)}:{rng.randint(1, 6)}"
            # A clean run of a 12-job queue takes about 1.2 s, 0.35 s of it Python's start.
            plan.kills.append((rng.uniform(0.3, 1.2) if i == 0 else rng.uniform(0.25, 1.0), point))
            plan.downtime.append(rng.choice([0.0, 0.0, rng.uniform(0.05, 0.6)]))
        return plan

    def describe(self) -> str:
        parts = [f"kill at {d:.2f}s" + (f" or at {p}" if p else "") for d, p in self.kills]
        return f"seed {self.seed}: " + ", ".join(parts)


@dataclass
class RunResult:
    """What one crash run found: the kills that landed, and every broken promise."""

    seed: int
    plan: str
    kills_landed: int = 0
    problems: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def crash_run(directory: Path, seed: int, n_jobs: int = 12) -> RunResult:
    """One crash run: a mixed queue, the scheduler SIGKILLed per a random plan and restarted,
    then run to the end; every promise checked."""
    rng = random.Random(seed)
    mixed = make_mixed(directory, rng, n_jobs)
    plan = CrashPlan.random(seed)
    result = RunResult(seed, plan.describe())
    renames = random.Random(seed + 1)  # its own draws: the plan stays what the seed made it
    for i, ((delay, point), pause) in enumerate(zip(plan.kills, plan.downtime, strict=True)):
        proc = start_run(mixed.queue, point)
        out = kill_after(proc, delay)
        result.outputs.append(out)
        if proc.returncode == -signal.SIGKILL:
            result.kills_landed += 1
        elif proc.returncode not in (0, 1):
            result.problems.append(f"a killed run exited {proc.returncode}: {out[-400:]}")
        time.sleep(pause)  # the downtime of the plan (jobs run on meanwhile), not a wait
        if renames.random() < 0.3:
            # The queue file renamed while its jobs run on; the restart under the
            # new name must be the same queue (every check below then holds across it).
            moved = mixed.queue.with_name(f"renamed{i}.toml")
            mixed.queue.rename(moved)
            mixed.queue = moved
            result.plan += f"; renamed to {moved.name}"
    proc = start_run(mixed.queue)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        result.problems.append("the final run did not finish within 120 s")
    result.outputs.append(out)
    if proc.returncode not in (0, 1):
        result.problems.append(f"the final run exited {proc.returncode}: {out[-600:]}")
    try:
        result.problems.extend(check_all(mixed, result.outputs))
    except Exception as e:  # a check that cannot even read the state is a failure too
        result.problems.append(f"checking failed: {e!r}; last output:\n{out[-1500:]}")
    return result


# ---------------------------------------------------------------------------------------------
# the checks


def load_records(queue: Path) -> dict[str, JobRecord]:
    store = Store(queue_paths(queue).db, readonly=True)
    try:
        records: dict[str, JobRecord] = store.load()
        return records
    finally:
        store.close()


def check_all(mixed: Mixed, outputs: list[str]) -> list[str]:
    """Every promise of the crash test (docs/reliability.md, section 1); a list of what was broken (empty: all kept)."""
    problems: list[str] = []
    for i, out in enumerate(outputs):
        if "Traceback" in out:
            problems.append(f"run {i + 1} printed a traceback:\n{out[-1500:]}")
    problems += check_states(mixed)
    problems += check_runs(mixed)
    problems += check_status_files(mixed)
    problems += check_logs(mixed)
    problems += check_no_orphans(mixed.queue)
    return problems


def check_states(mixed: Mixed) -> list[str]:
    """Final state, attempt count and the last attempt's exit status of every job."""
    records = load_records(mixed.queue)
    problems = []
    for name, exp in mixed.expect.items():
        rec = records.get(name)
        if rec is None:
            problems.append(f"{name}: no record")
            continue
        if rec.state.value != exp.state:
            problems.append(f"{name}: state {rec.state.value}, expected {exp.state}")
        if rec.attempt != exp.attempts:
            problems.append(f"{name}: attempt {rec.attempt}, expected {exp.attempts}")
        if exp.exits:
            got = f"signal {rec.signal}" if rec.signal is not None else f"exit {rec.exit_code}"
            if got != exp.exits[-1]:
                problems.append(f"{name}: recorded {got}, expected {exp.exits[-1]}")
    return problems


def check_runs(mixed: Mixed) -> list[str]:
    """From the jobs' side: each attempt started exactly once, no attempt beyond the last."""
    seen: Counter[tuple[str, int]] = Counter()
    for line in mixed.runs.read_text().splitlines():
        job, number, _pid = line.split()
        seen[(job, int(number))] += 1
    problems = []
    for name, exp in mixed.expect.items():
        for attempt in range(1, exp.attempts + 1):
            n = seen.pop((name, attempt), 0)
            if n != 1:
                problems.append(f"{name}: attempt {attempt} started {n} times")
    for (name, attempt), n in seen.items():
        problems.append(f"{name}: attempt {attempt} started {n} times but should never run")
    return problems


def check_status_files(mixed: Mixed) -> list[str]:
    """The exit status of every attempt, as the wrapper recorded it.

    A launch cut short by a SIGKILL (its status file created, its wrapper never started) leaves
    an empty ``<name>.<attempt>.status``; the relaunch then writes ``<name>.<attempt>.N.status``
    and never reuses the other's. So of an attempt's files exactly one holds a status, the one
    expected, and any other is empty."""
    run_dir = queue_paths(mixed.queue).run_dir
    problems = []
    for name, exp in mixed.expect.items():
        for attempt, want in enumerate(exp.exits, 1):
            said: list[str] = []
            for path in sorted(run_dir.glob(f"{glob.escape(name)}.{attempt}.*status")):
                if not _STATUS.match(path.name[len(name) :]):
                    continue
                try:
                    got = path.read_text().strip()
                except OSError:
                    continue
                if got:
                    said.append(got)
            if not said:
                problems.append(f"{name}: no exit status for attempt {attempt}")
            elif said != [want]:
                problems.append(f"{name}: attempt {attempt} status {said}, expected [{want!r}]")
    return problems


_STATUS = re.compile(r"^\.\d+(?:\.\d+)?\.status$")


_LOG = re.compile(r"^(?P<name>.+?)\.(?P<attempt>\d+)(?:\.\d+)?\.log$")


def check_logs(mixed: Mixed) -> list[str]:
    """Each attempt's marker is in exactly one log, that log is its own attempt's, and no log
    holds two attempts' output (nothing was overwritten or shared)."""
    problems = []
    found: Counter[tuple[str, int]] = Counter()
    log_dir = mixed.log_dir
    for path in sorted(log_dir.iterdir()) if log_dir.is_dir() else []:
        m = _LOG.match(path.name)
        if not m:
            problems.append(f"unexpected file in the log directory: {path.name}")
            continue
        markers = re.findall(r"^marker (\S+) (\d+)$", path.read_text(), re.MULTILINE)
        if len(markers) > 1:
            problems.append(f"{path.name} holds {len(markers)} attempts' output: {markers}")
        for name, attempt in markers:
            if (name, attempt) != (m["name"], m["attempt"]):
                problems.append(f"{path.name} holds the output of {name} attempt {attempt}")
            found[(name, int(attempt))] += 1
    for name, exp in mixed.expect.items():
        for attempt in range(1, exp.attempts + 1):
            if found[(name, attempt)] != 1:
                problems.append(
                    f"{name}: attempt {attempt}'s output is in {found[(name, attempt)]} logs"
                )
    return problems


def queue_processes(queue: Path) -> list[psutil.Process]:
    """Live processes of this queue's jobs (the engine puts GTUI_QUEUE in their environment)."""
    found = []
    for proc in psutil.process_iter():
        try:
            # By folder: a crash run may rename its queue file, and jobs started under the
            # old name carry that one (each run has a folder of its own).
            env_queue = proc.environ().get("GTUI_QUEUE")
            mine = env_queue is not None and Path(env_queue).parent == queue.resolve().parent
            if mine and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def check_no_orphans(queue: Path, wait_s: float = 5.0) -> list[str]:
    """Once the queue has ended nothing of its jobs may still run (a short wait for the kernel to
    finish tearing down what just exited)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = queue_processes(queue)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return [f"orphan process {p.pid}: {' '.join(p.cmdline())[:120]}" for p in left]


def kill_queue_processes(queue: Path) -> None:
    """Clean-up after a failed test: leave nothing of its jobs behind."""
    for proc in queue_processes(queue):
        try:
            proc.kill()
        except psutil.Error:
            pass
