"""Running one command of a session to its end: its output read and bounded, its stdin fed, its group killed.

Shared by both ways a command runs (cud.daemon.session.processes): a process group the daemon
started, or a systemd transient unit (cud.daemon.session.unit.CommandUnit); both are a :class:`Running`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import typing

__all__ = ("Completed", "ProcessGroup", "Running", "collect", "feed", "feed_pipe", "read_all")

_READ_CHUNK = 64 * 1024
#: Seconds the output is still read after the command ended (a child it left behind may hold the pipes).
_DRAIN_TIMEOUT = 0.5


@dataclasses.dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    #: None: killed at the timeout.
    exit_code: int | None
    #: At most ``max_output`` bytes each; ``truncated`` says whether more was thrown away.
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool


class Running(typing.Protocol):
    """A command being run: a process group here, or a transient unit (cud.daemon.session.unit.CommandUnit)."""

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    async def kill(self) -> None: ...


class ProcessGroup:
    """A command started here: killing it kills its whole group (what it forked goes with it; what it
    detached, the reset ends)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def wait(self) -> int:
        return await self.proc.wait()

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()


def read_all(fd: int) -> bytes:
    """Everything the pipe ``fd`` gives until its writers closed it (then closed here)."""
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read()


async def collect(items: list[str], command: Running, outs: tuple[int, int], feeding: typing.Awaitable[None], *,
                   timeout: float, max_output: int) -> Completed:
    """Wait for ``command`` (killed past ``timeout``, or when the caller gives up) while reading its
    stdout and stderr pipes ``outs`` (read ends, closed here) and ``feeding`` its stdin."""
    cut = [False]
    outputs = [bytearray(), bytearray()]
    files = [os.fdopen(fd, "rb", buffering=0) for fd in outs]
    readers = [asyncio.ensure_future(_read_capped(file, kept, max_output, cut))
               for file, kept in zip(files, outputs, strict=True)]
    feeder = asyncio.ensure_future(feeding)
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(command.wait()), timeout)
    except TimeoutError:
        timed_out = True
    finally:
        if command.returncode is None:  # the timeout, or the caller gave up (cancelled)
            await command.kill()
        # A child left running in the background holds the pipes open: it must not hold the answer up.
        _done, pending = await asyncio.wait(readers, timeout=_DRAIN_TIMEOUT)
        for task in (*pending, feeder):
            task.cancel()
        await asyncio.gather(*readers, feeder, return_exceptions=True)
        for file in files:  # a reader cancelled before it began never handed its pipe to a transport
            file.close()
    return Completed(tuple(items), None if timed_out else command.returncode, bytes(outputs[0]), bytes(outputs[1]),
                     timed_out, cut[0])


async def _read_capped(pipe: typing.BinaryIO, kept: bytearray, cap: int, cut: list[bool]) -> None:
    """All of ``pipe`` read (then closed), the first ``cap`` bytes kept in ``kept`` (reading on, so the
    writer never blocks)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _protocol = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        while True:
            chunk = await reader.read(_READ_CHUNK)
            if not chunk:
                return
            room = cap - len(kept)
            if len(chunk) > room:
                cut[0] = True
            kept += chunk[: max(room, 0)]
    finally:
        transport.close()


async def feed(proc: asyncio.subprocess.Process, data: bytes | None) -> None:
    if data is None or proc.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    proc.stdin.close()


async def feed_pipe(fd: int, data: bytes) -> None:
    """Write ``data`` to the pipe ``fd`` and close it (a reader that went away ends the writing)."""
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        if data:
            writer.write(data)
            await writer.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        transport.close()
