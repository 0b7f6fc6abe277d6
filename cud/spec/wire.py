"""A spec on the socket: the ``submit`` request that carries it and its files, and the daemon's check of it.

``cuctl submit --spec`` sends the task's own keys as ``submit``'s fields, the rest of
the spec (:meth:`Spec.judging`) as ``spec``, and the size of every file the spec names on
the submitter's side as ``files`` (``{name as written: bytes}``). The daemon rebuilds the
spec from the request and parses it with the same code, so both sides agree on what it
means; it checks that the files are exactly those the spec names, each within its
``[sessions]`` limits, and then says ``ready``: the files' bytes follow as ``chunk``
messages, in the order of ``files``, each chunk within one file (:func:`file_pieces`),
the way ``put`` sends one file. A refusal therefore comes before any byte is sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cud.errors import SpecError
from cud.protocol import CHUNK_BYTES, MAX_FILE_LIMIT
from cud.spec.schema import TASK_KEYS, Spec, parse_spec

__all__ = ("MAX_SPEC_FILE_BYTES", "file_pieces", "spec_from_request", "submit_fields")

#: The largest file a spec may send as far as the protocol goes (the daemon's ``[sessions]
#: max_spec_file_bytes`` and ``max_spec_total_bytes`` cap each file and all of them further).
MAX_SPEC_FILE_BYTES = MAX_FILE_LIMIT
#: Spec keys newer than the protocol version, with the value a daemon without them means.
_NEWER_KEYS: dict[str, object] = {"postconfig": [], "pass_if": "all", "fail_if_answer": None}


def submit_fields(spec: Spec, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The ``submit`` request's fields for ``spec`` and its local files (their sizes: the bytes follow as chunks)."""
    for name, data in files.items():
        if len(data) > MAX_SPEC_FILE_BYTES:
            raise SpecError(f"spec file {name!r} is {len(data)} bytes; a spec's file may have at most "
                            f"{MAX_SPEC_FILE_BYTES} bytes", key=name, value=len(data), limit=MAX_SPEC_FILE_BYTES)
    judging = spec.judging()
    # Keys a daemon from before them would refuse, sent only when they say something: such a daemon
    # still takes every spec that does not use them.
    for key, default in _NEWER_KEYS.items():
        if judging[key] == default:
            del judging[key]
    fields: dict[str, Any] = {**spec.task_fields(), "spec": judging}
    if files:
        fields["files"] = {name: len(data) for name, data in files.items()}
    return fields


def file_pieces(files: Mapping[str, bytes], piece: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The bytes of ``files`` for ``submit``'s ``chunk`` messages: in their order, no piece across two files."""
    for data in files.values():
        view = memoryview(data)
        for start in range(0, len(view), piece):
            yield bytes(view[start : start + piece])


def spec_from_request(request: Mapping[str, Any]) -> tuple[Spec, dict[str, int]]:
    """The spec a ``submit`` request carries, parsed again, and its files' sizes (checked to be those it names)."""
    judging = request["spec"]
    raw = {k: request[k] for k in TASK_KEYS if k in request}
    if isinstance(judging, dict):
        for key in judging:
            if key in raw:  # a task key belongs to submit's own fields, where submit checked it
                raise SpecError(f"'submit' field 'spec' repeats the task key {key!r}", key=f"spec.{key}",
                                value=repr(key))
        raw.update(judging)
    spec = parse_spec(raw if isinstance(judging, dict) else judging)
    sizes: dict[str, int] = dict(request.get("files") or {})
    wanted = spec.local_files()
    missing = [n for n in wanted if n not in sizes]
    extra = [n for n in sizes if n not in wanted]
    if missing or extra:
        what = f"lacks {missing[0]!r}" if missing else f"has {extra[0]!r}, which the spec does not name"
        raise SpecError(f"the spec's files do not match what it names: the request {what}",
                        key="files", value=repr((missing or extra)[0]))
    return spec, sizes
