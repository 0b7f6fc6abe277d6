"""A spec on the socket: the ``submit`` request that carries it and its files, and the daemon's check of it.

``cuctl submit --spec`` sends the task's own keys as ``submit``'s fields, the rest of
the spec (:meth:`Spec.judging`) as ``spec``, and every file the spec names on the
submitter's side as ``files`` (``{name as written: base64}``). The daemon rebuilds the
spec from the request and parses it with the same code, so both sides agree on what
it means; then it checks that the files are exactly those the spec names, within the caps.

The whole request must fit one socket message (1 MiB, cud.protocol), so files are capped
below that: :data:`MAX_FILE_BYTES` each, :data:`MAX_FILES_BYTES` in all.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from cud.errors import SpecError
from cud.spec.schema import TASK_KEYS, Spec, parse_spec

__all__ = ("MAX_FILE_BYTES", "MAX_FILES_BYTES", "check_sizes", "spec_from_request", "submit_fields")

#: The largest file a spec may send (a setup file, or a fixture an ``equals`` check compares with).
MAX_FILE_BYTES = 256 * 1024
#: All of a spec's files together (base64 makes them 4/3 larger on the socket, under its 1 MiB).
MAX_FILES_BYTES = 512 * 1024


def check_sizes(files: Mapping[str, bytes]) -> None:
    """SpecError naming the file and the cap if one file, or all of them, are too large."""
    total = 0
    for name, data in files.items():
        if len(data) > MAX_FILE_BYTES:
            raise SpecError(f"spec file {name!r} is {len(data)} bytes; a spec's file may have at most "
                            f"{MAX_FILE_BYTES} bytes (MAX_FILE_BYTES)", key=name, value=len(data),
                            limit=MAX_FILE_BYTES)
        total += len(data)
    if total > MAX_FILES_BYTES:
        raise SpecError(f"the spec's files are {total} bytes together; a spec may send at most {MAX_FILES_BYTES} "
                        f"bytes of files (MAX_FILES_BYTES)", key="files", value=total, limit=MAX_FILES_BYTES)


def submit_fields(spec: Spec, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The ``submit`` request's fields for ``spec`` and the contents of its local files."""
    check_sizes(files)
    fields: dict[str, Any] = {**spec.task_fields(), "spec": spec.judging()}
    if files:
        fields["files"] = {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}
    return fields


def spec_from_request(request: Mapping[str, Any]) -> tuple[Spec, dict[str, bytes]]:
    """The spec a ``submit`` request carries, parsed again, and its files decoded and checked."""
    judging = request["spec"]
    raw = {k: request[k] for k in TASK_KEYS if k in request}
    if isinstance(judging, dict):
        for key in judging:
            if key in raw:  # a task key belongs to submit's own fields, where submit checked it
                raise SpecError(f"'submit' field 'spec' repeats the task key {key!r}", key=f"spec.{key}",
                                value=repr(key))
        raw.update(judging)
    spec = parse_spec(raw if isinstance(judging, dict) else judging)
    sent = request.get("files") or {}
    files: dict[str, bytes] = {}
    for name, text in sent.items():
        try:
            files[name] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise SpecError(f"spec file {name!r} is not base64", key=f"files.{name}", value=str(text)[:40]) from None
    check_sizes(files)
    wanted = spec.local_files()
    missing = [n for n in wanted if n not in files]
    extra = [n for n in files if n not in wanted]
    if missing or extra:
        what = f"lacks {missing[0]!r}" if missing else f"has {extra[0]!r}, which the spec does not name"
        raise SpecError(f"the spec's files do not match what it names: the request {what}",
                        key="files", value=repr((missing or extra)[0]))
    return spec, files
