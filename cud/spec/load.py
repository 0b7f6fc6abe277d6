"""Reading a spec file on the submitter's side (``cuctl submit --spec``): TOML or JSON, and its local files.

A file ending in ``.json`` is JSON; any other is TOML. Files the spec names
(setup ``src``, check ``equals``) are read relative to the spec file's folder,
each within :data:`cud.spec.wire.MAX_SPEC_FILE_BYTES` (the daemon's ``[sessions]`` may allow less).
"""

from __future__ import annotations

import datetime
import json
import os
import tomllib
from pathlib import Path
from typing import Any

from cud.errors import SpecError
from cud.spec.schema import Spec, parse_spec
from cud.spec.values import join
from cud.spec.wire import MAX_SPEC_FILE_BYTES

__all__ = ("load_spec",)


def load_spec(path: Path) -> tuple[Spec, dict[str, bytes]]:
    """The spec in ``path`` and the bytes of every local file it names; SpecError says what is wrong."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read spec file {str(path)!r}: {exc.strerror}", key="", value=str(path)) from None
    try:
        if path.suffix == ".json":
            raw = json.loads(data.decode("utf-8"))
        else:
            raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SpecError(f"spec file {str(path)!r} is not UTF-8 (bad byte at offset {exc.start})", key="",
                        value=str(path)) from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise SpecError(f"spec file {str(path)!r} is not valid {kind}: {exc}", key="", value=str(path)) from None
    _no_dates("", raw)
    spec = parse_spec(raw)
    return spec, {name: _read(path.parent, name, key) for name, key in spec.local_files().items()}


def _read(folder: Path, name: str, key: str) -> bytes:
    where = folder / name  # an absolute name stays itself
    try:
        with open(where, "rb") as fh:
            # Its size first, so a file far too large is refused without being read.
            too_large = os.fstat(fh.fileno()).st_size > MAX_SPEC_FILE_BYTES
            data = b"" if too_large else fh.read(MAX_SPEC_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"spec key {key!r} names {name!r}, which cannot be read ({str(where)!r}: {exc.strerror})",
                        key=key, value=repr(name)) from None
    if too_large or len(data) > MAX_SPEC_FILE_BYTES:
        raise SpecError(f"spec key {key!r} names {name!r}, which is larger than the {MAX_SPEC_FILE_BYTES} bytes "
                        f"a spec's file may have (MAX_SPEC_FILE_BYTES)", key=key, value=repr(name),
                        limit=MAX_SPEC_FILE_BYTES)
    return data


def _no_dates(path: str, value: Any) -> None:
    # TOML has dates and times, JSON (the socket) does not: refused here, naming the key.
    if isinstance(value, (datetime.date, datetime.time)):
        raise SpecError(f"spec key {path!r} is the TOML date/time {value!r}; a spec holds no dates",
                        key=path, value=repr(value))
    if isinstance(value, dict):
        for key, item in value.items():
            _no_dates(join(path, str(key)), item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_dates(join(path, index), item)
