"""A D-Bus connection of the daemon's outlives a full socket (daemon/targets/dbus_writes.py).

A real dbus-daemon is stopped (SIGSTOP) while the client sends a burst of calls, so the
socket's buffers fill and a send meets EAGAIN, as on a loaded machine where the bus gets no
CPU for a moment. Upstream dbus-fast ended the connection there ("Bad file descriptor" for
every later call); with the patient writer every call is answered once the bus reads again.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import os
import signal
import socket
import subprocess
from pathlib import Path

from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus

import cud.daemon.targets.dbus_writes  # noqa: F401  (what the daemon loads: the patch)
from tests.support.recorder import wait_until

#: Calls in the burst and the bytes each carries: together far over the socket's buffers.
CALLS, BYTES = 64, 60_000


def _bus(tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    address = f"unix:path={tmp_path / 'bus'}"
    proc = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address={address}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: (tmp_path / "bus").exists(), 30, "the test's dbus-daemon to listen")
    return proc, address


async def _burst(address: str, bus_pid: int) -> tuple[list[object], bool, int]:
    bus = await MessageBus(bus_address=address).connect()
    sock: socket.socket = bus._sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    full = 0
    os.kill(bus_pid, signal.SIGSTOP)
    try:
        # Each carries a long argument (any name the daemon refuses: the reply is an error, which is fine:
        # what is tested is that the request got there and the connection lived).
        calls = [asyncio.ensure_future(bus.call(Message(
            destination="org.freedesktop.DBus", path="/org/freedesktop/DBus", interface="org.freedesktop.DBus",
            member="NameHasOwner", signature="s", body=[f"x{i}" + "y" * BYTES])))
            for i in range(CALLS)]
        await asyncio.sleep(0.5)  # the writer has met the full socket by now
        full = len(bus._writer.messages)  # type: ignore[union-attr]
    finally:
        os.kill(bus_pid, signal.SIGCONT)
    replies = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 60)
    alive = bus.connected
    bus.disconnect()
    return replies, alive, full


def test_a_burst_into_a_full_socket_is_sent_when_the_bus_reads_again(tmp_path: Path) -> None:
    proc, address = _bus(tmp_path)
    try:
        replies, alive, queued = asyncio.run(_burst(address, proc.pid))
    finally:
        proc.kill()
        proc.wait()
    assert queued > 0, "the burst never filled the socket: the test did not test the full socket"
    failures = [r for r in replies if isinstance(r, BaseException)]
    assert not failures, failures[:3]
    assert alive
    # Every call reached the bus daemon and was answered by it (an error reply naming the bad name).
    assert all(isinstance(r, Message) and r.message_type in (MessageType.ERROR, MessageType.METHOD_RETURN)
               for r in replies)


async def _after_the_end(address: str, bus_pid: int) -> tuple[list[BaseException], list[str]]:
    """Calls on a connection whose bus daemon was killed: one while the end is not yet seen, one after."""
    logged: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: logged.append(str(context.get("message"))))
    bus = await MessageBus(bus_address=address).connect()
    os.kill(bus_pid, signal.SIGKILL)
    errors: list[BaseException] = []
    for pause in (0.0, 0.5):  # the first send meets the closed socket; the second comes after the reader saw it
        await asyncio.sleep(pause)
        try:
            await asyncio.wait_for(bus.call(Message(
                destination="org.freedesktop.DBus", path="/org/freedesktop/DBus", interface="org.freedesktop.DBus",
                member="GetId")), 10)
        except (OSError, EOFError, TimeoutError) as exc:
            errors.append(exc)
    gc.collect()  # a failed future no one retrieved is logged when collected
    await asyncio.sleep(0)
    return errors, logged


def test_calls_on_a_connection_that_ended_fail_at_once_as_lost_and_log_nothing(tmp_path: Path) -> None:
    proc, address = _bus(tmp_path)
    try:
        errors, logged = asyncio.run(_after_the_end(address, proc.pid))
    finally:
        proc.kill()
        proc.wait()
    # Upstream: "[Errno 9] Bad file descriptor" out of call() (it registered the closed socket's writer), the
    # reply's failure logged as "Future exception was never retrieved"; a call after could wait for ever.
    assert len(errors) == 2 and not any(isinstance(e, TimeoutError) for e in errors), errors
    assert all(getattr(e, "errno", None) != errno.EBADF for e in errors), errors
    assert not logged, logged
