"""A host's ``gtui events QUEUE`` as a trigger: each JSON line it prints sets ``changed``, so the
dashboard asks the host for its state when something happened there, not only on a timer. The
stream is one ssh session on the host's multiplexed connection; it ends with the dashboard."""

from __future__ import annotations

import asyncio
import contextlib

from gtui.fleet import transport
from gtui.fleet.config import Host

RETRY_S = 10.0


async def watch(host: Host, changed: asyncio.Event) -> None:
    """Follow the host's events until cancelled; a stream that ends is started again later."""
    while True:
        proc = None
        try:
            proc = await asyncio.create_subprocess_exec(
                # A pty: the host hangs the stream up when the connection goes.
                *transport.ssh_argv(host, "-tt", master="no"),
                transport.remote_line(host, ["events", host.queue]),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
            assert proc.stdout is not None
            while line := await proc.stdout.readline():
                if line.lstrip().startswith(b"{"):
                    changed.set()
        except OSError:
            pass
        finally:
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(Exception):
                    await asyncio.shield(proc.wait())
        await asyncio.sleep(RETRY_S)
