"""A running scheduler's event log, read line by line as it is written.

``gtui run`` flushes one line per event, so a test can wait for the very line that proves
something happened (a refusal, the end of recovery) instead of sleeping and hoping.
"""

from __future__ import annotations

import subprocess
import threading
import time


class LiveOutput:
    """Collects the stdout of ``proc`` (text mode) in a thread, for waiting on lines."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None, "start the process with stdout=PIPE"
        self.proc = proc
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self._lines.append(line)

    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    def text(self) -> str:
        return "".join(self.lines())

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        """The first line holding ``needle``; fails with everything printed so far if none comes
        within ``timeout`` (generous: only a hang hits it) or the process ends without it."""
        deadline = time.monotonic() + timeout
        while True:
            ended = not self._thread.is_alive()  # EOF: nothing more will come (checked first)
            found = next((line for line in self.lines() if needle in line), None)
            if found is not None:
                return found
            if ended or time.monotonic() > deadline:
                why = "the scheduler's output ended" if ended else f"{timeout:.0f} s passed"
                raise AssertionError(f"{why} without a line holding {needle!r}:\n{self.text()}")
            time.sleep(0.02)

    def finish(self, timeout: float = 60.0) -> str:
        """Wait for the process to exit; its whole output."""
        self.proc.wait(timeout)
        self._thread.join(timeout)
        return self.text()


def start_live(*args: str) -> LiveOutput:
    """`gtui ARGS...` (e.g. `run`, the queue file) as a real subprocess, its output read live."""
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "gtui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    return LiveOutput(proc)
