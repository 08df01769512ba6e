"""One reader of ``/proc/PID/stat`` for the core: a process's state, parent, group, session and
start, from one read of one small file (psutil read it twice). The executor's process trees and
the control client's question "is the scheduler stopped?" both read it here."""

from __future__ import annotations

from dataclasses import dataclass

# A process stopped by a signal (Ctrl-Z on `gtui run`, `kill -STOP`) runs no code until it is
# sent SIGCONT. A traced one ("t") is left out: under strace it is "t" for a moment at every
# system call, and `kill -CONT` is not what lets a debugger's go.
STOPPED = frozenset({"T"})


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    pgid: int
    start: int  # clock ticks since boot: with pid, identifies a process
    state: str  # R, S, D, T (stopped), t (traced), Z, ...
    sid: int = 0

    @property
    def stopped(self) -> bool:
        return self.state in STOPPED


def read_stat(pid: int) -> ProcStat | None:
    """``pid``'s line of /proc, or None when it is gone or cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcStat(pid, int(rest[1]), int(rest[2]), int(rest[19]), rest[0], int(rest[3]))
    except (IndexError, ValueError):
        return None


def stopped_state(pid: int) -> str | None:
    """``T`` when ``pid`` is stopped (it answers nothing until continued), else None."""
    st = read_stat(pid)
    return st.state if st is not None and st.stopped else None
