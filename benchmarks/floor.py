"""Overhead near the floor: gtui beside task-spooler (``tsp``) and a bare fork+exec loop, all
in the same run, interleaved, medians of several repeats. One command:
``python -m benchmarks --only floor`` (``--quick``: smaller counts).

1. per-job overhead on a chain of ``true`` jobs, steady state: (T600 - T200) / 400, where T is
   the wall from the first submission (gtui: ``gtui run`` of a queue of N jobs, max_parallel 1;
   tsp: N ``tsp true`` from a bash loop into ``tsp -S 1``, then ``tsp -w``) to the last end; the
   floor is a bash loop of N ``/bin/true`` (a fork and exec each).
2. throughput of 1,000 ``true`` jobs on 8 slots: jobs/s, gtui ``max_parallel = 8`` against
   ``tsp -S 8`` (its clients' submissions included, as a user meets it).
3. ``gtui add`` into a running queue (median of a bash loop's adds) beside ``python -c pass`` and
   ``python -S -c pass`` (the floor of any Python client) and ``tsp true``, and the add client's
   imports alone (``python -c 'import gtui.entry, ...'``: what it loads before it asks); and
   ``gtui add --from FILE`` of 10,000 commands into a running queue, one call. The client is
   gtui as ``pip install .`` installs it, in a venv of its own: the development venv's editable
   install loads a path finder at every start of its Python (pathlib, re, urllib.parse: about
   30 ms of ``python -c pass``) that no user's gtui pays. Its figures are given beside.
4. where gtui's per-job cost above the floor goes: a chain of ``true`` jobs run by the engine in
   this process with timers around each step, in CPU time per job (benchmarks/floor_split.py:
   the wrapper, the start-time read, the store's commits, the placement pass, the log file,
   the event bus, reaping, the rest), beside the floor's CPU per job.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import floor_split
from benchmarks.common import Row, Section, median, missed_by
from benchmarks.peers import (
    TSP,
    Work,
    bytecode_cache,
    gtui_cmd,
    is_task_spooler,
    tail,
    wait_for,
    workdir,
    write_queue,
)


def gtui_true(work: Work, n: int, parallel: int, label: str) -> float:
    """Wall of a headless ``gtui run`` of ``n`` ``true`` jobs (it exits when they are done)."""
    queue = work.dir / f"{label}.toml"
    write_queue(queue, parallel, [(f"j{i}", "true") for i in range(n)])
    log = work.dir / f"{label}.log"
    t0 = time.perf_counter()
    proc = work.popen([*gtui_cmd(), "run", str(queue)], log)
    code = proc.wait(timeout=120 + n * 0.2)
    if code != 0:
        raise RuntimeError(f"gtui run {label} exited {code}: {tail(log)}")
    return time.perf_counter() - t0


def tsp_true(work: Work, n: int, slots: int) -> float:
    """Wall of ``n`` ``tsp true`` submitted from a bash loop until the last one ended."""
    tsp = shlex.quote(TSP or "tsp")
    work.tsp("-K") if (work.dir / "tsp.sock").exists() else None
    work.tsp("-S", str(slots))
    script = (
        f"for i in $(seq {n}); do {tsp} true >/dev/null; done; "
        f"while {tsp} -l | grep -qE ' (running|queued) '; do sleep 0.01; done"
    )
    wall = work.sh(script, timeout=120 + n)
    work.tsp("-C")
    return wall


def floor_loop(work: Work, n: int) -> float:
    return work.sh(f"for i in $(seq {n}); do /bin/true; done", timeout=60 + n)


def hold_queue(work: Work, label: str, waiting: int = 0) -> Path:
    """A queue whose running scheduler holds one blocking job, for adds into it."""
    queue = work.dir / f"{label}.toml"
    jobs = [("hold", work.hold_cmd())] + [(f"w{i}", "true") for i in range(waiting)]
    write_queue(queue, 1, jobs)
    work.ready.unlink(missing_ok=True)
    proc = work.popen([*gtui_cmd(), "run", str(queue)], work.dir / f"{label}.log")
    wait_for(lambda: work.ready.exists() or proc.poll() is not None, 120, label)
    if proc.poll() is not None:
        raise RuntimeError(f"gtui run {label} exited: {tail(work.dir / f'{label}.log')}")
    return queue


def _quiet(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=600)


def installed(where: Path) -> Path:
    """gtui as ``pip install .`` installs it (not editable; its byte code compiled at install),
    with no dependency beside it: an add into a running queue imports only the standard
    library. Built from a copy of the checkout (a build writes build/ and *.egg-info where it
    runs). Returns the venv's bin folder."""
    repo = Path(__file__).resolve().parents[1]
    src, dist, venv = where / "src", where / "dist", where / "venv"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("app", "styles"):
        shutil.copytree(repo / folder, src / folder, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(repo / name, src / name)
    pip = [sys.executable, "-m", "pip"]
    _quiet([*pip, "wheel", "-q", "--no-deps", "-w", str(dist), str(src)])
    _quiet([sys.executable, "-m", "venv", str(venv)])
    _quiet([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(next(dist.glob("*.whl")))])
    return venv / "bin"


def per_call_ms(work: Work, line: str, count: int) -> float:
    return work.sh(f"for i in $(seq {count}); do {line}; done", timeout=600) / count * 1e3


def run(quick: bool) -> Section:
    reps = 1 if quick else 3
    small, big = (50, 150) if quick else (200, 600)
    many = 200 if quick else 1000
    lines_n = 1000 if quick else 10000
    adds = 10 if quick else 40
    with_tsp = is_task_spooler(TSP)
    f: dict[str, list[float]] = {}

    def put(key: str, value: float) -> None:
        f.setdefault(key, []).append(value)

    with bytecode_cache(), workdir() as client:
        plain = installed(client.dir)
        for r in range(reps):
            with workdir() as work:
                for n in (small, big):  # interleaved: each peer's T_small and T_big in turn
                    put(f"floor T{n}", floor_loop(work, n))
                    put(f"gtui T{n}", gtui_true(work, n, 1, f"chain{r}-{n}"))
                    if with_tsp:
                        put(f"tsp T{n}", tsp_true(work, n, 1))
                put("gtui 8 slots s", gtui_true(work, many, 8, f"thr{r}"))
                if with_tsp:
                    put("tsp 8 slots s", tsp_true(work, many, 8))
            with workdir() as work:
                q = shlex.quote(str(hold_queue(work, f"adds{r}")))
                imports = "import gtui.entry, gtui.commands.add_job, gtui.core.control.transport"
                clients = {"": plain, "dev ": Path(sys.executable).parent}
                for label, bin_dir in clients.items():
                    gtui = shlex.quote(str(bin_dir / "gtui"))
                    py = shlex.quote(str(bin_dir / "python"))
                    work.sh(f"{py} -c '{imports}'", timeout=60)  # its byte code, once, untimed
                    put(f"{label}python -c pass ms", per_call_ms(work, f"{py} -c pass", adds))
                    put(f"{label}python -S -c pass ms", per_call_ms(work, f"{py} -S -c pass", adds))
                    add = f"{gtui} add {q} --gpus 0 --name {label.strip()}a$i -- true >/dev/null"
                    put(f"{label}gtui add ms", per_call_ms(work, add, adds))
                    # After the adds, which leave gtui's byte code in the cache: imports alone.
                    put(
                        f"{label}gtui add imports ms",
                        per_call_ms(work, f"{py} -c '{imports}'", adds),
                    )
                gtui = shlex.join(gtui_cmd())
                src = work.dir / "cmds.txt"
                src.write_text("".join(f"echo {i}\n" for i in range(lines_n)))
                t0 = time.perf_counter()
                work.sh(f"{gtui} add {q} --gpus 0 --from {shlex.quote(str(src))}", 120)
                put(f"gtui add --from {lines_n} s", time.perf_counter() - t0)
            if with_tsp:
                with workdir() as work:
                    work.tsp("-S", "1")
                    work.tsp("-N", "1", "bash", "-c", work.hold_cmd())
                    tsp = shlex.quote(TSP or "tsp")
                    put("tsp true ms", per_call_ms(work, f"{tsp} true >/dev/null", adds))

    def m(key: str) -> float:
        return median(f.get(key, []))

    def per_job(peer: str) -> float:
        return (m(f"{peer} T{big}") - m(f"{peer} T{small}")) / (big - small) * 1e3

    g, fl = per_job("gtui"), per_job("floor")
    t = per_job("tsp") if with_tsp else float("nan")
    g_rate, t_rate = many / m("gtui 8 slots s"), many / m("tsp 8 slots s") if with_tsp else 0.0
    add_ms, from_s = m("gtui add ms"), m(f"gtui add --from {lines_n} s")
    rows = [
        Row(
            f"per-job overhead, chain of `true`, (T{big} - T{small}) / {big - small}",
            "gtui <= tsp",
            f"gtui {g:.2f} ms/job ({g / t:.2f}x tsp)" if with_tsp else f"gtui {g:.2f} ms/job",
            f"tsp {t:.2f} ms/job; fork+exec floor {fl:.2f} ms/job (gtui adds {g - fl:.2f} ms)",
            g <= t if with_tsp else None,
            missed_by(g, t) if with_tsp and g > t else "",
        ),
        Row(
            f"throughput, {many} `true` jobs, 8 slots",
            "gtui >= tsp -S 8",
            f"gtui {g_rate:.0f} jobs/s" + (f" ({g_rate / t_rate:.2f}x tsp)" if with_tsp else ""),
            f"tsp {t_rate:.0f} jobs/s" if with_tsp else "",
            g_rate >= t_rate if with_tsp else None,
            missed_by(g_rate, t_rate, higher_is_better=True) if with_tsp else "",
        ),
        Row(
            "`gtui add` into a running queue",
            "<= 40 ms",
            f"{add_ms:.1f} ms",
            f"python -c pass {m('python -c pass ms'):.1f} ms, -S {m('python -S -c pass ms'):.1f}"
            f" ms; its imports alone {m('gtui add imports ms'):.1f} ms;"
            f" tsp true {m('tsp true ms'):.1f} ms (installed as `pip install .`; the editable"
            f" development install: add {m('dev gtui add ms'):.1f} ms, python -c pass"
            f" {m('dev python -c pass ms'):.1f} ms)",
            add_ms <= 40,
            missed_by(add_ms, 40),
        ),
        Row(
            f"`gtui add --from` {lines_n} commands into a running queue",
            "<= 2 s" if lines_n == 10000 else "",
            f"{from_s:.2f} s",
            "",
            from_s <= 2 if lines_n == 10000 else None,
            missed_by(from_s, 2),
        ),
    ]
    split = floor_split.split(100 if quick else 300)
    rows.append(split_row(split))
    figures = {k: ", ".join(f"{v:.4g}" for v in vs) for k, vs in f.items()}
    figures.update({f"CPU ms/job: {k}": f"{v:.3f}" for k, v in split.items()})
    return Section(title="floor", method=__doc__ or "", rows=rows, figures=figures)


def split_row(split: dict[str, float]) -> Row:
    """gtui's CPU per job beside the floor's, and its largest causes (the figures list all)."""
    total, floor = split["total"], split["floor"]
    causes = {k: v for k, v in split.items() if k not in ("total", "floor", "wall")}
    top = sorted(causes.items(), key=lambda kv: -kv[1])[:6]
    return Row(
        "CPU per job above the fork+exec floor, chain of `true`, by cause",
        "",
        f"gtui {total:.2f} ms CPU/job (the scheduler and the job's own processes)",
        f"floor {floor:.2f} ms CPU/job (gtui adds {total - floor:.2f} ms): "
        + "; ".join(f"{k} {v:.2f}" for k, v in top),
        None,
    )
