"""cuctl cp, exec, clipboard and reset: a seat's session from outside (docs/sessions.md)."""

from __future__ import annotations

import argparse
import base64
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from cud.cuctl.chunks import Chunks
from cud.cuctl.client import Client
from cud.cuctl.output import emit_json, warn
from cud.cuctl.tasks import describe_reset
from cud.errors import ConfigError
from cud.protocol import CHUNK_BYTES, SEAT_NAME

__all__ = ()

#: ``SEAT:PATH``: a seat's name, then a path in its home (``./a:b`` is a local file named ``a:b``).
_REMOTE = re.compile(rf"(?P<seat>{SEAT_NAME.pattern}):(?P<path>.*)", re.DOTALL)
#: What ``cuctl exec`` exits with when the daemon killed the command at its timeout (as timeout(1) does).
TIMED_OUT = 124


#: ``task/ID:PATH``: a file a finished spec task collected (its ``[collect]``), at its path in the home.
_ARTIFACT = re.compile(r"task/(?P<id>[0-9]{1,18}):(?P<path>.+)", re.DOTALL)


def _remote(text: str) -> tuple[str, str] | None:
    found = _REMOTE.fullmatch(text)
    return (found["seat"], found["path"]) if found else None


def cp(client: Client, args: argparse.Namespace) -> int:
    if _ARTIFACT.fullmatch(args.target):
        raise ConfigError(f"{args.target!r}: a task's collected files are kept as they were; copy them "
                          "out of it, not into it", target=args.target)
    artifact = _ARTIFACT.fullmatch(args.source)
    if artifact:
        return _get_artifact(client, args, int(artifact["id"]), artifact["path"], args.target)
    source, target = _remote(args.source), _remote(args.target)
    if (source is None) == (target is None):
        raise ConfigError(f"cuctl cp copies between here and a seat: one of {args.source!r} and {args.target!r} must "
                          "be SEAT:PATH and the other a local path (./a:b for a local name with a colon)")
    if target is not None:
        return _put(client, args, args.source, *target)
    assert source is not None
    return _get(client, args, *source, args.target)


def _put(client: Client, args: argparse.Namespace, local: str, seat: str, path: str) -> int:
    mode = None if args.mode is None else _mode(args.mode)
    if local == "-":
        data = sys.stdin.buffer.read()
        pieces: Any = [data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]
        size = len(data)
    else:
        try:
            size = os.stat(local).st_size
            handle = open(local, "rb")  # noqa: SIM115 (closed below, after the upload)
        except OSError as exc:
            raise ConfigError(f"cannot read {local!r}: {exc.strerror}", path=local) from None
        if mode is None:
            mode = os.stat(local).st_mode & 0o777
        pieces = _read_pieces(handle, size)
    if not path or path.endswith("/"):
        path += os.path.basename(local) if local != "-" else ""
    try:
        result = client.upload("put", pieces, seat=seat, path=path, size=size, mode=mode)
    finally:
        if local != "-":
            handle.close()
    if args.json:
        emit_json(result)
    else:
        print(f"{seat}:{result['path']}: {result['bytes']} bytes")
    return 0


def _read_pieces(handle: Any, size: int) -> Iterator[bytes]:
    left = size
    while left > 0:  # the size announced: a file growing meanwhile is cut there
        piece = handle.read(min(CHUNK_BYTES, left))
        if not piece:
            raise ConfigError(f"{handle.name!r} shrank while it was sent", path=handle.name)
        left -= len(piece)
        yield piece


def _get(client: Client, args: argparse.Namespace, seat: str, path: str, local: str) -> int:
    chunks = Chunks("file")
    result = client.call("get", chunks, seat=seat, path=path)
    return _write_local(args, chunks.join(result), result, local, f"{seat}:{result['path']}")


def _get_artifact(client: Client, args: argparse.Namespace, task_id: int, path: str, local: str) -> int:
    chunks = Chunks("file")
    result = client.call("artifact", chunks, id=task_id, path=path)
    # A record's files are kept 0600, as the daemon keeps them: the home's mode is not part of the record.
    return _write_local(args, chunks.join(result), {**result, "mode": 0o600}, local, f"task/{task_id}:{path}")


def _write_local(args: argparse.Namespace, data: bytes, result: dict[str, Any], local: str, source: str) -> int:
    if local == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    if os.path.isdir(local):
        local = os.path.join(local, os.path.basename(result["path"]))
    tmp = f"{local}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        os.fchmod(fh.fileno(), result["mode"] & 0o777)
    os.replace(tmp, local)
    if args.json:
        emit_json({"local": os.path.abspath(local), **result})
    else:
        print(f"{local}: {result['bytes']} bytes from {source}")
    return 0


def _mode(text: str) -> int:
    if not re.fullmatch(r"0?[0-7]{3,4}", text):
        raise ConfigError(f"--mode must be an octal file mode like 644 or 0600, got {text!r}", value=text)
    return int(text, 8)


def _exec_options(head: list[str], args: argparse.Namespace) -> None:
    """Options given between SEAT and ``--`` (argparse leaves them in the command's part)."""
    parser = argparse.ArgumentParser(prog="cuctl exec SEAT", add_help=False, exit_on_error=False)
    parser.add_argument("--timeout", type=int, default=args.timeout)
    parser.add_argument("--cwd", default=args.cwd)
    try:
        parsed = parser.parse_args(head)
    except (argparse.ArgumentError, SystemExit):
        raise ConfigError(f"cuctl exec takes only --timeout S and --cwd DIR before '--', got {' '.join(head)!r}") from None
    args.timeout, args.cwd = parsed.timeout, parsed.cwd


def exec_command(client: Client, args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if "--" in argv:
        split = argv.index("--")
        _exec_options(argv[:split], args)
        argv = argv[split + 1:]
    if not argv:
        raise ConfigError("cuctl exec needs a command: cuctl exec SEAT -- PROGRAM [ARG...]")
    result = client.call("exec", wait_forever=True, seat=args.seat, argv=argv, timeout=args.timeout, cwd=args.cwd)
    stdout, stderr = base64.b64decode(result["stdout"]), base64.b64decode(result["stderr"])
    if args.json:
        emit_json({**result, "stdout": stdout.decode(errors="replace"), "stderr": stderr.decode(errors="replace")})
    else:
        sys.stdout.buffer.write(stdout)
        sys.stdout.buffer.flush()
        sys.stderr.buffer.write(stderr)
        sys.stderr.buffer.flush()
        if result["truncated"]:
            warn("cuctl exec: the output was cut at [sessions] max_output_bytes")
    if result["timed_out"]:
        warn(f"cuctl exec: {argv[0]!r} was killed at its timeout")
        return TIMED_OUT
    code = result["exit_code"]
    return 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell says it


def clipboard(client: Client, args: argparse.Namespace) -> int:
    if args.action == "get":
        if args.text is not None:
            raise ConfigError("cuctl clipboard SEAT get takes no text")
        result = client.call("clipboard", seat=args.seat)
        if args.json:
            emit_json(result)
        else:
            sys.stdout.write(result["text"])
            sys.stdout.flush()
        return 0
    text = args.text if args.text is not None else sys.stdin.read()
    result = client.call("clipboard", seat=args.seat, text=text)
    if args.json:
        emit_json(result)
    else:
        print(f"{args.seat}: clipboard set ({len(text)} characters)")
    return 0


def reset(client: Client, args: argparse.Namespace) -> int:
    result = client.call("reset", wait_forever=True, seat=args.seat)
    if args.json:
        emit_json(result)
    else:
        print(f"{args.seat}: {describe_reset(result)}")
    return 0
