"""Parallel `gtui add`s into one running scheduler, and the count of every job's runs.

Shared by tests/reliability/test_parallel_adds.py and the soak (``python -m soak --only adds``).
A round starts ``gtui run`` on a queue whose one job (the gate) keeps it up, then several real
processes (the shells of a sweep launcher, ``xargs -P``) each ``gtui add`` uniquely named jobs at
the same moment. Each job appends ``name attempt pid`` to a runs file when it starts, so the
checks count real runs from the jobs' side: every added job in the file once, one record, one
run, attempt 1 started once. The scheduler may also be SIGKILLed during the burst and started
again: then every add either landed once or failed loudly (a non-zero exit with a message), and
still nothing ran twice.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from gtui.core.queue.queuefile import load_queue
from tests.reliability.mixed import load_records, start_run
from tests.waiting import wait_for

# One adder: a real process that runs `gtui add` (the CLI's own main, as the shell would) for
# each of its names, once every adder of the round may go (the go file), so that they overlap.
_ADDER = textwrap.dedent(
    """
    import json, os, sys, time
    from gtui.cli import main
    queue, go, out, cmd = sys.argv[1:5]
    names = sys.argv[5:]
    while not os.path.exists(go):
        time.sleep(0.002)
    with open(out, "w") as f:
        for name in names:
            rc = main(["add", queue, "--name", name, "--gpus", "0", "--", cmd])
            f.write(json.dumps([name, rc]) + "\\n")
            f.flush()
    """
)


@dataclass
class Burst:
    """One round's outcome: what each add said, and what was broken."""

    added: dict[str, int] = field(default_factory=dict)  # job -> the add's exit status
    kills: int = 0  # SIGKILLs of the scheduler that landed during the burst
    problems: list[str] = field(default_factory=list)


def write_queue(directory: Path) -> Path:
    """The queue: a gate job that keeps the scheduler up until the test releases it."""
    runs = directory / "runs"
    runs.touch()
    q = directory / "q.toml"
    q.write_text(
        "[settings]\n"
        'poll = "0.2s"\nfake_gpus = "2x80G"\nlog_dir = "logs"\n\n'
        "[[jobs]]\n"
        'name = "gate"\n'
        "gpus = 0\n"
        f"cmd = '{job_command(directory)}; "
        f"while [ ! -e {directory / 'release'} ]; do sleep 0.05; done'\n"
    )
    return q


def job_command(directory: Path) -> str:
    return f'echo "$GTUI_JOB $GTUI_ATTEMPT $$" >> {directory / "runs"}'


def _runs(directory: Path) -> Counter[tuple[str, int]]:
    seen: Counter[tuple[str, int]] = Counter()
    for line in (directory / "runs").read_text().splitlines():
        job, attempt, _pid = line.split()
        seen[(job, int(attempt))] += 1
    return seen


def _scheduler_up(directory: Path) -> bool:
    return ("gate", 1) in _runs(directory)


def burst(
    directory: Path,
    round_no: int,
    *,
    adders: int = 10,
    per_adder: int = 15,
    kills: int = 0,
    seed: int = 0,
) -> Burst:
    """One round in ``directory`` (made empty by the caller): the scheduler, the burst of adds
    (``kills``: SIGKILL and restart the scheduler that many times meanwhile), the end, the
    checks."""
    q = write_queue(directory)
    rng = random.Random(seed * 1009 + round_no)
    go = directory / "go"
    cmd = job_command(directory)
    names = [[f"r{round_no}-s{i}-j{k}" for k in range(per_adder)] for i in range(adders)]
    outs = [directory / f"adder{i}.out" for i in range(adders)]
    result = Burst()
    outputs: list[str] = []
    run = start_run(q)
    procs: list[subprocess.Popen[str]] = []
    try:
        wait_for(lambda: _scheduler_up(directory), what="the scheduler to start its gate job")
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _ADDER, str(q), str(go), str(out), cmd, *mine],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            for mine, out in zip(names, outs, strict=True)
        ]
        go.touch()
        for _ in range(kills):
            # Kill it once some adds have landed since it (re)started, while the rest go on.
            landed = _count_lines(outs)
            target = landed + rng.randint(1, max(1, adders * per_adder // (kills + 1)))
            wait_for(
                lambda t=target: _count_lines(outs) >= t or _all_done(procs),
                what="adds to land before the next SIGKILL",
            )
            if _all_done(procs):
                break
            run.send_signal(signal.SIGKILL)
            outputs.append(run.communicate(timeout=60)[0])
            result.kills += 1
            run = start_run(q)
        errors = [p.communicate(timeout=120)[1] for p in procs]
        for out in outs:
            for line in out.read_text().splitlines():
                name, rc = json.loads(line)
                result.added[name] = rc
        (directory / "release").touch()
        outputs.append(run.communicate(timeout=120)[0])
    finally:
        (directory / "release").touch()
        for p in [run, *procs]:
            if p.poll() is None:
                p.kill()
                p.communicate()
    result.problems = check(directory, q, names, result.added, outputs, errors)
    return result


def _all_done(procs: list[subprocess.Popen[str]]) -> bool:
    return all(p.poll() is not None for p in procs)


def _count_lines(outs: list[Path]) -> int:
    n = 0
    for out in outs:
        try:
            n += out.read_text().count("\n")
        except FileNotFoundError:
            pass
    return n


def check(
    directory: Path,
    queue: Path,
    names: list[list[str]],
    added: dict[str, int],
    outputs: list[str],
    errors: list[str],
) -> list[str]:
    """One name, one entry in the file, one record, one run; a failed add said so."""
    problems: list[str] = []
    for i, out in enumerate(outputs):
        if "Traceback" in out:
            problems.append(f"scheduler run {i + 1} printed a traceback:\n{out[-1500:]}")
    for i, err in enumerate(errors):
        if "Traceback" in err or "internal error" in err:
            problems.append(f"adder {i} printed a traceback:\n{err[-1500:]}")
    in_file = Counter(j.name for j in load_queue(queue).jobs)
    records = load_records(queue)
    seen = _runs(directory)
    for name in (n for group in names for n in group):
        rc = added.get(name)
        if rc is None:
            problems.append(f"{name}: its add never returned")
            continue
        if in_file[name] > 1:
            problems.append(f"{name}: {in_file[name]} entries in the queue file")
        if rc != 0 and in_file[name] == 0:
            continue  # failed loudly, and nothing landed
        if rc == 0 and in_file[name] == 0:
            problems.append(f"{name}: `gtui add` said it was added, but it is not in the file")
            continue
        rec = records.get(name)
        if rec is None:
            problems.append(f"{name}: in the file, but no record")
            continue
        if (rec.state.value, rec.attempt) != ("done", 1):
            problems.append(f"{name}: {rec.state.value} at attempt {rec.attempt}, not done at 1")
        for attempt in range(1, max(2, rec.attempt + 1)):
            n = seen.pop((name, attempt), 0)
            if n != 1:
                problems.append(f"{name}: attempt {attempt} started {n} times")
    seen.pop(("gate", 1), None)
    problems += [f"{job}: attempt {a} started {n} times, unasked" for (job, a), n in seen.items()]
    return problems


def clean(directory: Path) -> None:
    """Nothing of a failed round may outlive it (its jobs carry its queue in their env)."""
    from tests.reliability.mixed import kill_queue_processes

    kill_queue_processes(directory / "q.toml")
