"""A ``submit``'s spec files: their sizes checked against ``[sessions]``, then their bytes received as ``put``'s are.

The request names each file and its size (:mod:`cud.spec.wire`); once every check of the
submit has passed, the daemon says ``ready`` and takes the files' ``chunk`` messages with
the one upload loop (:meth:`Context.receive_exactly`) into a :class:`FileSpool`, a file
with no name. Only when every byte is there does the submit store the task and its files,
in one transaction; an upload cut off mid-way leaves neither.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Mapping

from cud.daemon.server.handlers.base import Context
from cud.daemon.session.config import SessionLimits
from cud.daemon.store.spec_files import FileSpool
from cud.errors import SpecError, StorageFull
from cud.protocol import ready_message

__all__ = ()


def check_spec_file_sizes(sizes: Mapping[str, int], limits: SessionLimits) -> None:
    """SpecError naming the file, its size and the config key when one file, or all of them, are over the limit."""
    for name, size in sizes.items():
        if size > limits.max_spec_file_bytes:
            raise SpecError(f"spec file {name!r} is {size} bytes; the daemon takes at most "
                            f"{limits.max_spec_file_bytes} bytes per file (its config key [sessions] "
                            f"max_spec_file_bytes)", key=name, value=size, limit=limits.max_spec_file_bytes,
                            config_key="sessions.max_spec_file_bytes")
    total = sum(sizes.values())
    if total > limits.max_spec_total_bytes:
        raise SpecError(f"the spec's files are {total} bytes together ({', '.join(sizes)}); the daemon takes at "
                        f"most {limits.max_spec_total_bytes} bytes per spec (its config key [sessions] "
                        f"max_spec_total_bytes)", key="files", value=total, limit=limits.max_spec_total_bytes,
                        config_key="sessions.max_spec_total_bytes")


async def receive_spec_files(ctx: Context, sizes: Mapping[str, int]) -> FileSpool | None:
    """The files' bytes from the client, in the order of ``sizes``; None when the spec sends none.

    The caller closes the spool (the files are gone with it, stored or not)."""
    if not sizes:
        return None
    state_dir = ctx.daemon.config.state_dir
    spool = FileSpool(state_dir)
    try:
        await ctx.send(dict(ready_message()))
        for name, size in sizes.items():
            spool.begin(name, size)
            await ctx.receive_exactly(size, lambda chunk: asyncio.to_thread(spool.write, chunk), f"spec file {name!r}")
    except OSError as exc:
        spool.close()
        if exc.errno != errno.ENOSPC:
            raise
        raise StorageFull(f"the disk of the state directory {str(state_dir)!r} filled up while spec file "
                          f"{name!r} arrived; the task was not queued", path=str(state_dir)) from None
    except BaseException:
        spool.close()
        raise
    return spool

