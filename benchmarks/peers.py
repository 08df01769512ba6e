"""gtui beside its peers: task-spooler (``tsp``), a plain bash loop, ``xargs -P 8`` and plain
asyncio subprocesses, on the same workloads, in one run.

1. chain: N trivial jobs one after another. gtui: a queue file of N ``gpus = 0`` jobs with
   ``max_parallel = 1``, run by a headless ``gtui run`` subprocess; tsp: ``tsp -S 1`` (its own
   TS_SOCKET and TMPDIR), held by a first job that waits for a ``go`` file while every job is
   submitted, then released; bash: ``for ...; do bash -c CMD; done``; plain asyncio: awaited
   ``create_subprocess_exec('bash', '-c', CMD)`` one after another. Every job is
   ``bash -c 'date +%s%N >> stamps'``; per-job time = (last stamp - first stamp) / (N - 1), so
   start-up and submission are left out.
2. throughput: N trivial jobs with 8 slots (gtui ``max_parallel = 8``, ``tsp -S 8`` held by an
   8-slot job, ``xargs -P 8``, asyncio with a semaphore of 8; the serial bash loop for scale):
   jobs/s = N / (last stamp - first stamp).
3. submissions from another shell into a running queue whose first job blocks: a bash loop of
   ``gtui add q.toml --name sI -- true`` (a name each: the same command twice derives the same
   name, which gtui refuses) against ``tsp true``; ms per submission = the loop's wall / count.
   gtui also into a queue already holding 10,000 (and, in the full run, 100,000) waiting jobs,
   with fewer submissions where one takes long (the count is in the figures).
4. resident memory (RSS) of the scheduler, sampled every 50 ms during each workload: the
   ``gtui run`` process, the tsp server (found by its listening socket, scoped to our
   TS_SOCKET); max reported. tsp also keeps one client process per queued job: their total
   at the moment every job was queued is a figure of its own.

tsp's server holds at most ~1000 queued jobs (it select()s over one connection per queued job;
FD_SETSIZE is 1024 and TS_MAXCONN can only lower it): beyond that a submitter blocks. So tsp
gets its jobs in held batches of at most 900 (hold, submit, release, drain), and the figures add
the batches up (per-job time over the sum of the batches' spans; jobs/s = N / that sum).

The gtui processes get a private bytecode cache (PYTHONPYCACHEPREFIX in a temp dir, warmed up
first), as an installed gtui has its ``.pyc`` files: where PYTHONDONTWRITEBYTECODE is set, each
start would otherwise compile gtui's modules from source (the figures give 10 ``gtui add`` with
the cache, then 10 without, before the measured loop).

Every process started here carries a token in its environment; the clean-up (``tsp -K`` on our
socket, SIGTERM to ``gtui run``, then anything still carrying the token) runs in ``finally``.

    python -m benchmarks.peers [--quick] [--profile DIR]

``--profile DIR`` (or ``GTUI_PEERS_PROFILE=DIR``) runs each ``gtui run`` under cProfile and
keeps its ``.prof`` in DIR.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common import Row, Section, median, missed_by, spread, toml_str

TSP = shutil.which("tsp")
MARK = "GTUI_PEERS_BENCH"  # the env var with this run's token: every process we start has it
SLOTS = 8
STAMP = "date +%s%N >> {stamps}"
HOLD = "touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done"
PROFILE_ENV = "GTUI_PEERS_PROFILE"
# tsp's server select()s over one connection per queued job (FD_SETSIZE 1024, TS_MAXCONN can
# only lower it): beyond ~1000 queued jobs a submitter blocks. A held batch stays under that.
TSP_HELD_MAX = 900


def gtui_cmd() -> list[str]:
    """``gtui`` as a user runs it: the console script beside this interpreter."""
    script = Path(sys.executable).with_name("gtui")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gtui"]


def is_task_spooler(path: str | None) -> bool:
    if not path:
        return False
    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "task spooler" in (out.stdout + out.stderr).lower()


# --------------------------------------------------------------------------- processes


@dataclass
class Work:
    """A private temp dir, the environment every started process gets, and what to clean up."""

    dir: Path
    token: str
    env: dict[str, str]
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def go(self) -> Path:
        return self.dir / "go"

    @property
    def ready(self) -> Path:
        return self.dir / "ready"

    def hold_cmd(self) -> str:
        return HOLD.format(ready=shlex.quote(str(self.ready)), go=shlex.quote(str(self.go)))

    def stamp_cmd(self, stamps: Path) -> str:
        return STAMP.format(stamps=shlex.quote(str(stamps)))

    def popen(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv, cwd=self.dir, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append(proc)
        return proc

    def sh(self, script: str, timeout: float, env: dict[str, str] | None = None) -> float:
        """Run a bash script here; its wall time in seconds."""
        t0 = time.perf_counter()
        subprocess.run(
            ["bash", "-c", script], cwd=self.dir, env=env or self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout, check=True,
        )
        return time.perf_counter() - t0

    def tsp(self, *args: str, timeout: float = 120) -> None:
        assert TSP
        subprocess.run(
            [TSP, *args], cwd=self.dir, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout, check=True,
        )


def marked(token: str) -> list[psutil.Process]:
    """Our user's processes that carry ``token``: only processes this benchmark started."""
    uid = os.getuid()
    found = []
    for p in psutil.process_iter():
        try:
            if (
                p.uids().real == uid
                and p.status() != psutil.STATUS_ZOMBIE
                and p.environ().get(MARK) == token
            ):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


ADD_WHY = (
    "each add reads the queue file (~9 MB at 100,000 jobs), hashes it to check it is the version "
    "the scheduler runs, and writes it whole again atomically (fsync), plus the interpreter's "
    "start"
)


def cleanup(work: Work) -> None:
    for proc in work.started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    with suppress(OSError):
        work.go.touch()  # any held job ends on its own
    if TSP and Path(work.env["TS_SOCKET"]).exists():
        with suppress(subprocess.SubprocessError, OSError):
            work.tsp("-K")
    for _ in range(3):  # tsp's clients exit on their own after -K; whatever stays is ended
        left = marked(work.token)
        if not left:
            return
        _, alive = psutil.wait_procs(left, timeout=2)
        for p in alive:
            with suppress(psutil.Error):
                p.terminate()
        _, alive = psutil.wait_procs(alive, timeout=3)
        for p in alive:
            with suppress(psutil.Error):
                p.kill()


@contextmanager
def workdir() -> Iterator[Work]:
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        token = uuid.uuid4().hex
        env = dict(os.environ)
        env.update(
            {
                MARK: token,
                "TMPDIR": tmp,  # tsp's output files; gtui's control socket
                "XDG_RUNTIME_DIR": tmp,
                "TS_SOCKET": f"{tmp}/tsp.sock",
            }
        )
        if _BYTECODE:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = _BYTECODE[-1]
        work = Work(Path(tmp), token, env)
        try:
            yield work
        finally:
            cleanup(work)


_BYTECODE: list[str] = []  # the bytecode cache of this run, while bytecode_cache() is open


@contextmanager
def bytecode_cache() -> Iterator[None]:
    """Compiled bytecode for every Python process started here, as a pip install has it.

    Where PYTHONDONTWRITEBYTECODE is set (it is on the machine these figures were first taken
    on) and gtui's modules have no current ``.pyc``, every ``gtui`` start compiles them from
    source: ~75 ms of each ``gtui add``, which no installed gtui pays. The processes get a
    private cache instead (PYTHONPYCACHEPREFIX in a temp dir; nothing is written beside the
    sources), filled by a warm-up on gtui's run and add paths, and removed at the end."""
    with tempfile.TemporaryDirectory(prefix="peers-pyc-") as tmp:
        _BYTECODE.append(tmp)
        try:
            with workdir() as work:
                queue = work.dir / "warm.toml"
                write_queue(queue, 1, [("hold", work.hold_cmd())])
                proc = work.popen([*gtui_cmd(), "run", str(queue)], work.dir / "warm.log")
                wait_for(lambda: work.ready.exists() or proc.poll() is not None, 120, "warm-up")
                gtui = shlex.join(gtui_cmd())
                work.sh(f"{gtui} add warm.toml --name warm -- true; {gtui} --version", 120)
            yield
        finally:
            _BYTECODE.remove(tmp)


class PeakRss:
    """The largest RSS (MiB) of one process, sampled every ``every`` seconds in a thread."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        self.proc = psutil.Process(pid)
        self.every = every
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while True:
            with suppress(psutil.Error):
                self.peak = max(self.peak, self.proc.memory_info().rss)
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mib(self) -> float:
        return self.peak / 2**20


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.05)


def xspread(values: list[float]) -> str:
    """A ratio's ``median x (min-max)`` over repeats."""
    if not values:
        return "n/a"
    text = f"{median(values):.2f}x"
    return text if len(values) == 1 else f"{text} ({min(values):.2f}-{max(values):.2f})"


def read_ns(stamps: Path, n: int) -> list[int]:
    values = sorted(int(x) for x in stamps.read_text().split()) if stamps.exists() else []
    if len(values) != n:
        raise RuntimeError(f"{stamps.name}: {len(values)} stamps, expected {n}")
    return values


def per_job_ms(values: list[int]) -> float:
    return (values[-1] - values[0]) / (len(values) - 1) / 1e6


def jobs_per_s(values: list[int]) -> float:
    return len(values) / max(1e-9, (values[-1] - values[0]) / 1e9)


def lines(path: Path, n: int) -> bool:
    try:
        return path.read_bytes().count(b"\n") >= n
    except FileNotFoundError:
        return False


def tail(path: Path, n: int = 5) -> str:
    try:
        return " / ".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


# --------------------------------------------------------------------------- gtui


def write_queue(
    path: Path, parallel: int, jobs: list[tuple[str, str]], gpus: int | None = 0
) -> None:
    gpu_line = f"gpus = {gpus}\n" if gpus is not None else ""
    body = "".join(
        f'[[jobs]]\nname = "{name}"\n{gpu_line}cmd = {toml_str(cmd)}\n\n' for name, cmd in jobs
    )
    path.write_text(f'[settings]\nfake_gpus = "1x80G"\nmax_parallel = {parallel}\n\n{body}')


def gtui_run_argv(queue: Path, label: str) -> list[str]:
    prof_dir = os.environ.get(PROFILE_ENV)
    if prof_dir:
        out = Path(prof_dir) / f"{label}-{time.strftime('%H%M%S')}.prof"
        return [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "gtui", "run", str(queue)]
    return [*gtui_cmd(), "run", str(queue)]


def gtui_jobs(work: Work, n: int, parallel: int, label: str) -> dict[str, float]:
    """N stamp jobs run by a headless ``gtui run`` that exits when they are done."""
    stamps = work.dir / f"{label}.stamps"
    queue = work.dir / f"{label}.toml"
    cmd = work.stamp_cmd(stamps)
    write_queue(queue, parallel, [(f"j{i}", cmd) for i in range(n)])
    log = work.dir / f"{label}.log"
    t0 = time.perf_counter()
    proc = work.popen(gtui_run_argv(queue, label), log)
    with PeakRss(proc.pid) as rss:
        code = proc.wait(timeout=60 + n * 0.2)
    wall = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"gtui run {label} exited {code}: {tail(log)}")
    return {"rss_mib": rss.mib, "wall_s": wall}


def gtui_stamps(work: Work, label: str, n: int) -> list[int]:
    return read_ns(work.dir / f"{label}.stamps", n)


def gtui_adds(
    work: Work, waiting: int, count: int, budget_s: float, label: str, pyc_ab: int = 0
) -> dict[str, float]:
    """``gtui add`` from a bash loop into a running queue: a blocking first job + ``waiting``.
    ``pyc_ab``: first that many adds with the bytecode cache, then as many without (where the
    machine sets PYTHONDONTWRITEBYTECODE), as figures of their own."""
    queue = work.dir / f"{label}.toml"
    jobs = [("hold", work.hold_cmd())] + [(f"w{i}", "true") for i in range(waiting)]
    write_queue(queue, 1, jobs)
    log = work.dir / f"{label}.log"
    t0 = time.perf_counter()
    proc = work.popen(gtui_run_argv(queue, label), log)
    wait_for(lambda: work.ready.exists() or proc.poll() is not None, 120 + waiting / 200, label)
    if proc.poll() is not None:
        raise RuntimeError(f"gtui run {label} exited {proc.returncode}: {tail(log)}")
    startup = time.perf_counter() - t0
    gtui = shlex.join(gtui_cmd())
    out, err = work.dir / f"{label}.add.out", work.dir / f"{label}.add.err"

    def loop(first: int, last: int, prefix: str = "s", env: dict[str, str] | None = None) -> float:
        script = (
            f"for i in $(seq {first} {last}); do {gtui} add {shlex.quote(queue.name)} "
            f"--name {prefix}$i -- true; done >> {shlex.quote(str(out))} "
            f"2>> {shlex.quote(str(err))}"
        )
        return work.sh(script, timeout=600, env=env)

    ab: dict[str, float] = {}
    no_pyc = os.environ.get("PYTHONDONTWRITEBYTECODE")
    if pyc_ab and no_pyc and "PYTHONPYCACHEPREFIX" in work.env:
        env = {k: v for k, v in work.env.items() if k != "PYTHONPYCACHEPREFIX"}
        env["PYTHONDONTWRITEBYTECODE"] = no_pyc
        ab["pyc_ms"] = loop(1, pyc_ab, "c") / pyc_ab * 1e3
        ab["no_pyc_ms"] = loop(1, pyc_ab, "u", env) / pyc_ab * 1e3
        out.write_text("")  # the count below is the main loop's
    with PeakRss(proc.pid) as rss:
        first = loop(1, 1)
        if first > 2.0:
            total = 5
        elif first * count > budget_s:
            total = max(5, int(budget_s / first))
        else:
            total = count
        wall = first + (loop(2, total) if total > 1 else 0.0)
    added = out.read_text().count("added ")
    if added != total:
        raise RuntimeError(f"{label}: {added} of {total} adds succeeded: {tail(err)}")
    unconfirmed = err.read_text().count("did not take it yet") if err.exists() else 0
    return {
        "ms": wall / total * 1e3,
        "count": total,
        "first_ms": first * 1e3,
        "rest_ms": (wall - first) / (total - 1) * 1e3 if total > 1 else float("nan"),
        "rss_mib": rss.mib,
        "startup_s": startup,
        "unconfirmed": unconfirmed,
        **ab,
    }


# --------------------------------------------------------------------------- task-spooler


def tsp_server(work: Work, timeout: float = 10) -> psutil.Process:
    """The tsp server of our socket: the marked ``tsp`` process bound to it."""
    sock = work.env["TS_SOCKET"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in marked(work.token):
            with suppress(psutil.Error):
                if p.name() == "tsp" and any(c.laddr == sock for c in p.net_connections("unix")):
                    return p
        time.sleep(0.05)
    raise RuntimeError(f"no tsp server found on {sock}")


def tsp_clients_mib(work: Work, server: int) -> tuple[int, float]:
    """The waiting ``tsp`` client processes (one per queued job) and their summed RSS."""
    count, total = 0, 0
    for p in marked(work.token):
        # A client whose job was just taken exits between the listing and these reads (a
        # NoSuchProcess here crashed the benchmark in a CI run): it is no longer waiting.
        with suppress(psutil.Error):
            if p.pid != server and p.name() == "tsp":
                total += p.memory_info().rss
                count += 1
    return count, total / 2**20


def tsp_batches(
    work: Work, n: int, slots: int, job: Callable[[int], str], drained: Callable[[int, int], bool]
) -> dict[str, float]:
    """N jobs into ``tsp -S slots``, in held batches of at most TSP_HELD_MAX: a ``slots``-slot
    job that waits for ``go`` holds the queue, the batch is submitted from a bash loop
    (``job(batch)``: one tsp command line), then ``go`` releases it and the batch drains
    (``drained(batch, size)``) before the next. The server's RSS is sampled all along."""
    work.tsp("-S", str(slots))
    server = tsp_server(work)
    submit, done, batch = 0.0, 0, 0
    procs, clients = 0, 0.0
    try:
        with PeakRss(server.pid) as rss:
            while done < n:
                size = min(TSP_HELD_MAX, n - done)
                work.ready.unlink(missing_ok=True)
                work.go.unlink(missing_ok=True)
                work.tsp("-N", str(slots), "bash", "-c", work.hold_cmd())
                wait_for(work.ready.exists, 30, "the tsp hold job")
                loop = f"for i in $(seq {size}); do {job(batch)}; done"
                submit += work.sh(loop, timeout=120 + size * 0.1)
                if batch == 0:
                    procs, clients = tsp_clients_mib(work, server.pid)
                work.go.touch()
                wait_for(partial(drained, batch, size), 60 + size * 0.1, f"tsp batch {batch}")
                done += size
                batch += 1
    finally:
        work.go.touch()
        work.tsp("-K")
    return {
        "rss_mib": rss.mib,
        "submit_ms": submit / n * 1e3,
        "clients": procs,
        "clients_mib": clients,
        "batches": batch,
    }


def tsp_stamp_jobs(work: Work, n: int, slots: int, label: str) -> dict[str, Any]:
    """N stamp jobs through tsp; the stamps of each batch (a list per batch) under "stamps"."""

    def path(batch: int) -> Path:
        return work.dir / f"{label}.{batch}.stamps"

    def job(batch: int) -> str:
        return shlex.join([TSP or "tsp", "bash", "-c", work.stamp_cmd(path(batch))])

    out: dict[str, Any] = dict(
        tsp_batches(work, n, slots, job, lambda batch, size: lines(path(batch), size))
    )
    out["stamps"] = [
        read_ns(path(b), min(TSP_HELD_MAX, n - b * TSP_HELD_MAX)) for b in range(out["batches"])
    ]
    return out


def tsp_adds(work: Work, count: int) -> dict[str, float]:
    """``tsp true`` from a bash loop into a server held by a blocking job (in held batches of
    at most TSP_HELD_MAX; the submission loops' wall / count)."""

    def drained(batch: int, size: int) -> bool:
        work.tsp("-w")  # the last job added: it starts last and ends at once
        return True

    tsp = shlex.quote(TSP or "tsp")
    out = tsp_batches(work, count, 1, lambda batch: f"{tsp} true", drained)
    return {"ms": out["submit_ms"], "rss_mib": out["rss_mib"], "batches": out["batches"]}


# --------------------------------------------------------------------------- shell, asyncio


def bash_loop(work: Work, n: int, stamps: Path) -> None:
    cmd = shlex.quote(work.stamp_cmd(stamps))
    work.sh(f"for i in $(seq {n}); do bash -c {cmd}; done", timeout=60 + n * 0.1)


def xargs_p(work: Work, n: int, stamps: Path) -> None:
    cmd = shlex.quote(work.stamp_cmd(stamps))
    work.sh(f"seq {n} | xargs -P {SLOTS} -I{{}} bash -c {cmd}", timeout=60 + n * 0.1)


async def _asyncio_jobs(cmd: str, n: int, parallel: int) -> None:
    sem = asyncio.Semaphore(parallel)

    async def one() -> None:
        async with sem:
            proc = await asyncio.create_subprocess_exec(
                "bash", "-c", cmd, stdin=asyncio.subprocess.DEVNULL
            )
            await proc.wait()

    if parallel == 1:  # as benchmarks/end_to_start.py: awaited one after another
        for _ in range(n):
            await one()
    else:
        await asyncio.gather(*(one() for _ in range(n)))


def asyncio_jobs(work: Work, n: int, parallel: int, stamps: Path) -> None:
    asyncio.run(_asyncio_jobs(work.stamp_cmd(stamps), n, parallel))


# --------------------------------------------------------------------------- workloads


def chain(n: int, with_tsp: bool) -> dict[str, float]:
    """One repeat of the chain: every peer back to back, per-job ms from the stamps."""
    out: dict[str, float] = {}
    with workdir() as work:
        g = gtui_jobs(work, n, 1, "chain-gtui")
        out["gtui_ms"] = per_job_ms(gtui_stamps(work, "chain-gtui", n))
        out["gtui_rss_mib"] = g["rss_mib"]
        if with_tsp:
            t = tsp_stamp_jobs(work, n, 1, "chain-tsp")
            spans = [b[-1] - b[0] for b in t["stamps"]]
            out["tsp_ms"] = sum(spans) / (n - len(spans)) / 1e6  # per_job_ms over batches
            out["tsp_rss_mib"] = t["rss_mib"]
            out["tsp_submit_ms"] = t["submit_ms"]
            out["tsp_clients"] = t["clients"]
            out["tsp_clients_mib"] = t["clients_mib"]
        bash_loop(work, n, work.dir / "chain-bash.stamps")
        out["bash_ms"] = per_job_ms(read_ns(work.dir / "chain-bash.stamps", n))
        asyncio_jobs(work, n, 1, work.dir / "chain-asyncio.stamps")
        out["asyncio_ms"] = per_job_ms(read_ns(work.dir / "chain-asyncio.stamps", n))
    return out


def throughput(n: int, with_tsp: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    with workdir() as work:
        g = gtui_jobs(work, n, SLOTS, "tp-gtui")
        out["gtui_jps"] = jobs_per_s(gtui_stamps(work, "tp-gtui", n))
        out["gtui_rss_mib"] = g["rss_mib"]
        if with_tsp:
            t = tsp_stamp_jobs(work, n, SLOTS, "tp-tsp")
            out["tsp_jps"] = n / (sum(b[-1] - b[0] for b in t["stamps"]) / 1e9)
            out["tsp_batches"] = t["batches"]
            out["tsp_rss_mib"] = t["rss_mib"]
            out["tsp_submit_ms"] = t["submit_ms"]
            out["tsp_clients"] = t["clients"]
            out["tsp_clients_mib"] = t["clients_mib"]
        xargs_p(work, n, work.dir / "tp-xargs.stamps")
        out["xargs_jps"] = jobs_per_s(read_ns(work.dir / "tp-xargs.stamps", n))
        bash_loop(work, n, work.dir / "tp-bash.stamps")
        out["bash_jps"] = jobs_per_s(read_ns(work.dir / "tp-bash.stamps", n))
        asyncio_jobs(work, n, SLOTS, work.dir / "tp-asyncio.stamps")
        out["asyncio_jps"] = jobs_per_s(read_ns(work.dir / "tp-asyncio.stamps", n))
    return out


def submissions(count: int, big: list[int], budget_s: float, with_tsp: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    with workdir() as work:
        g = gtui_adds(work, 0, count, float("inf"), "add-0", pyc_ab=10)
        out["gtui_ms"], out["gtui_count"], out["gtui_rss_mib"] = g["ms"], g["count"], g["rss_mib"]
        out["gtui_unconfirmed"] = g["unconfirmed"]
        if "no_pyc_ms" in g:  # 10 adds with the bytecode cache, then 10 without
            out["gtui_pyc_ms"], out["gtui_no_pyc_ms"] = g["pyc_ms"], g["no_pyc_ms"]
    if with_tsp:
        with workdir() as work:
            t = tsp_adds(work, count)
            out["tsp_ms"], out["tsp_rss_mib"] = t["ms"], t["rss_mib"]
    with workdir() as work:  # the floor of any Python command line, for scale
        py = shlex.quote(sys.executable)
        out["python_start_ms"] = work.sh(f"for i in $(seq 20); do {py} -c pass; done", 60) * 50
        gtui = shlex.join(gtui_cmd())
        versions = f"for i in $(seq 20); do {gtui} --version; done"
        out["gtui_version_ms"] = work.sh(versions, 60) * 50
    for waiting in big:
        with workdir() as work:
            g = gtui_adds(work, waiting, count, budget_s, f"add-{waiting}")
        for key in ("ms", "count", "first_ms", "rest_ms", "rss_mib", "startup_s", "unconfirmed"):
            out[f"gtui{waiting}_{key}"] = g[key]
    return out


# --------------------------------------------------------------------------- the section


def run(quick: bool) -> Section:
    if quick:
        # The smoke run (scripts/check): every peer and every path once, at counts that keep
        # it to seconds; the full run gives the figures.
        n_chain, n_tp, n_add, big, budget, repeats = 50, 100, 20, [2_000], 2.0, 1
    else:
        n_chain, n_tp, n_add, big, budget, repeats = 500, 2000, 1000, [10_000, 100_000], 60.0, 3
    have_tsp = is_task_spooler(TSP)
    with bytecode_cache():
        ch = [chain(n_chain, have_tsp) for _ in range(repeats)]
        tp = [throughput(n_tp, have_tsp) for _ in range(repeats)]
        sub = [submissions(n_add, big, budget, have_tsp) for _ in range(repeats)]

    def col(rows: list[dict[str, float]], key: str) -> list[float]:
        return [float(r[key]) for r in rows if key in r]

    def ratio(rows: list[dict[str, float]], a: str, b: str) -> list[float]:
        return [r[a] / r[b] for r in rows if a in r and b in r and r[b] > 0]

    def med(rows: list[dict[str, float]], key: str) -> float:
        return median(col(rows, key))

    no_tsp = "task-spooler (tsp) not installed: not measured"
    rows: list[Row] = []

    def compare(
        what: str, target: str, rs: list[float], unit: str, mine: str, theirs: str,
        ok: Callable[[float], bool] | None, needs_tsp: bool = False,
        bound: float = 0.0, why: str = "",
    ) -> None:
        if needs_tsp and not have_tsp:
            rows.append(Row(what, target, no_tsp, "", None))
            return
        by = missed_by(median(rs), bound, higher_is_better=unit == "jobs/s") if bound else ""
        rows.append(
            Row(
                what, target, f"gtui / peer {unit} {xspread(rs)} ({mine})", theirs,
                ok(median(rs)) if ok else None,
                "; ".join(p for p in (by, why) if p),
            )
        )

    per_job = (
        "per job, gtui starts a small wrapper that records the exit status (a fork and exec "
        "more than the job's own bash, ~20 % of its time), creates the job's log file, commits "
        "the start and the end to SQLite before it says them and appends the attempt to its "
        "history, and runs a placement pass (py-spy shares in 'Where the time goes', "
        "benchmarks/where_time_goes.py); tsp keeps its queue in memory"
    )

    # 1. chain
    g_ms = med(ch, "gtui_ms")
    compare(
        f"chain, {n_chain} jobs one after another: per-job time vs task-spooler (tsp -S 1)",
        "gtui / tsp <= 1.00x", ratio(ch, "gtui_ms", "tsp_ms"), "time",
        f"gtui {g_ms:.2f} ms/job", f"tsp {med(ch, 'tsp_ms'):.2f} ms/job",
        lambda r: r <= 1.0, needs_tsp=True, bound=1.0, why=per_job,
    )
    compare(
        f"chain, {n_chain} jobs: per-job time vs plain asyncio subprocesses, awaited in turn",
        "gtui / asyncio <= 1.25x", ratio(ch, "gtui_ms", "asyncio_ms"), "time",
        f"gtui {g_ms:.2f} ms/job", f"asyncio {med(ch, 'asyncio_ms'):.2f} ms/job",
        lambda r: r <= 1.25, bound=1.25, why=per_job,
    )
    compare(
        f"chain, {n_chain} jobs: per-job time vs a serial bash loop",
        "", ratio(ch, "gtui_ms", "bash_ms"), "time",
        f"gtui {g_ms:.2f} ms/job", f"bash loop {med(ch, 'bash_ms'):.2f} ms/job", None,
    )
    # 2. throughput
    g_jps = med(tp, "gtui_jps")
    compare(
        f"throughput, {n_tp} jobs, {SLOTS} slots: jobs/s vs task-spooler (tsp -S {SLOTS})",
        "gtui / tsp >= 1.00x", ratio(tp, "gtui_jps", "tsp_jps"), "jobs/s",
        f"gtui {g_jps:.0f} jobs/s", f"tsp {med(tp, 'tsp_jps'):.0f} jobs/s",
        lambda r: r >= 1.0, needs_tsp=True, bound=1.0, why=per_job,
    )
    compare(
        f"throughput, {n_tp} jobs: jobs/s vs plain asyncio, semaphore of {SLOTS}",
        "gtui / asyncio >= 0.80x (within 1.25x)", ratio(tp, "gtui_jps", "asyncio_jps"), "jobs/s",
        f"gtui {g_jps:.0f} jobs/s", f"asyncio {med(tp, 'asyncio_jps'):.0f} jobs/s",
        lambda r: r >= 0.8, bound=0.8, why=per_job,
    )
    compare(
        f"throughput, {n_tp} jobs: jobs/s vs xargs -P {SLOTS}",
        "", ratio(tp, "gtui_jps", "xargs_jps"), "jobs/s",
        f"gtui {g_jps:.0f} jobs/s", f"xargs -P {SLOTS} {med(tp, 'xargs_jps'):.0f} jobs/s", None,
    )
    compare(
        f"throughput, {n_tp} jobs: jobs/s vs a serial bash loop (1 slot)",
        "", ratio(tp, "gtui_jps", "bash_jps"), "jobs/s",
        f"gtui {g_jps:.0f} jobs/s", f"bash loop {med(tp, 'bash_jps'):.0f} jobs/s", None,
    )
    # 3. submissions
    g_add = med(sub, "gtui_ms")
    compare(
        f"{n_add} submissions into a running queue (empty but a blocking job): "
        "`gtui add` vs `tsp true`",
        "gtui / tsp <= 1.50x", ratio(sub, "gtui_ms", "tsp_ms"), "time",
        f"gtui {g_add:.1f} ms each", f"tsp {med(sub, 'tsp_ms'):.2f} ms each",
        lambda r: r <= 1.5, needs_tsp=True, bound=1.5,
        why="a Python interpreter's start and imports (~45 ms of each `gtui add`) against a "
        "C client's ~1 ms; the scheduler's side of an add is a few ms",
    )
    for waiting in big:
        key = f"gtui{waiting}_ms"
        n_done = int(med(sub, f"gtui{waiting}_count"))
        base = f"gtui into the empty queue {g_add:.1f} ms each" + (
            f"; tsp (empty) {med(sub, 'tsp_ms'):.2f} ms each" if have_tsp else ""
        )
        limit = 150.0 if waiting >= 100_000 else None
        rows.append(
            Row(
                f"`gtui add` into a running queue of {waiting:,} waiting jobs "
                f"({n_done} submissions)",
                "< 150 ms" if limit else "",
                f"{spread(col(sub, key))} ms each (the first "
                f"{med(sub, f'gtui{waiting}_first_ms'):.0f} ms, then "
                f"{med(sub, f'gtui{waiting}_rest_ms'):.0f} ms each)",
                base,
                (med(sub, key) < limit) if limit else None,
                f"{missed_by(med(sub, key), limit)}; " + ADD_WHY if limit else "",
            )
        )
    if 100_000 not in big:
        rows.append(
            Row(
                "`gtui add` into a running queue of 100,000 waiting jobs",
                "< 150 ms",
                "full run only (not measured with --quick)",
                "",
                None,
            )
        )
    # 4. memory
    for name, data in (("chain", ch), ("throughput", tp), ("submissions", sub)):
        theirs = f"tsp server {spread(col(data, 'tsp_rss_mib'))} MiB" if have_tsp else no_tsp
        if have_tsp and name != "submissions":
            theirs += (
                f" (+ {med(data, 'tsp_clients'):.0f} waiting tsp client processes, "
                f"{med(data, 'tsp_clients_mib'):.0f} MiB RSS summed)"
            )
        mine = f"gtui run {spread(col(data, 'gtui_rss_mib'))} MiB"
        if name == "submissions":
            mine += "".join(
                f"; {w:,} waiting: {spread(col(data, f'gtui{w}_rss_mib'))} MiB" for w in big
            )
        rows.append(
            Row(
                f"scheduler RSS (max, sampled every 50 ms), {name}: gtui run vs the tsp server",
                "",
                mine,
                theirs,
                None,
            )
        )

    section = Section(
        title="gtui beside task-spooler, a bash loop, xargs and plain asyncio",
        method=(
            (__doc__ or "").split("\n\n    python -m")[0].strip()
            + f"\n\n{repeats} repeat(s); each repeat runs every peer back to back. Ratios are "
            "gtui / peer computed within a repeat: median (min-max over repeats). For time, "
            "below 1 is gtui faster; for jobs/s, above 1 is gtui faster. Counts: chain "
            f"{n_chain}, throughput {n_tp}, submissions {n_add} (into the bigger queues, "
            f"as many as fit {budget:.0f} s, at least 5; 5 where one takes over 2 s)."
            + ("" if have_tsp else f" {no_tsp}.")
        ),
    )
    section.rows = rows
    figs: dict[str, Any] = {"repeats": repeats, "tsp": TSP if have_tsp else "not installed"}
    for prefix, data in (("chain", ch), ("throughput", tp), ("submissions", sub)):
        keys = sorted({k for r in data for k in r})
        for k in keys:
            figs[f"{prefix}: {k}"] = spread(col(data, k))
    section.figures = figs
    return section


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.peers")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", type=Path, help="run gtui run under cProfile; .prof files here")
    ns = ap.parse_args()
    if ns.profile:
        ns.profile.mkdir(parents=True, exist_ok=True)
        os.environ[PROFILE_ENV] = str(ns.profile.resolve())
    result = run(ns.quick)
    for r in result.rows:
        met = {True: "yes", False: "no", None: "-"}[r.met]
        print(f"{r.what}\n    {r.measured} | {r.baseline} | target {r.target or '-'} | {met}")
    for k, v in result.figures.items():
        print(f"{k:>45}: {v}")
