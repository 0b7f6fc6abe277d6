"""Reading a spec file on the submitter's side (``cuctl submit --spec``): TOML or JSON, and its local files.

A file ending in ``.json`` is JSON; any other is TOML. Files the spec names
(setup ``src``, check ``equals``, a metric's ``fixture``) are read relative to the spec file's folder,
each within :data:`cud.spec.wire.MAX_SPEC_FILE_BYTES` (the daemon's ``[sessions]`` may allow less),
and must be inside that folder once symlinks are resolved: an absolute name, a ``..`` climbing out
or a link pointing out is refused unless the submitter passed ``--allow-files-outside``
(``allow_outside``). The check is made on the file as opened (what its descriptor is), so a link
swapped in between a check and the read cannot carry another file.
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


def load_spec(path: Path, *, allow_outside: bool = False) -> tuple[Spec, dict[str, bytes]]:
    """The spec in ``path`` and the bytes of every local file it names; SpecError says what is wrong.

    ``allow_outside`` (``--allow-files-outside``): the files may be anywhere the caller can read.
    """
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
    folder = None if allow_outside else _folder(path)
    return spec, {name: _read(path, folder, name, key) for name, key in spec.local_files().items()}


def _folder(path: Path) -> str:
    """The spec file's folder with its links resolved: where its files must be."""
    try:
        return os.path.realpath(path.parent, strict=True)
    except OSError as exc:
        raise SpecError(f"cannot resolve the folder of spec file {str(path)!r}: {exc.strerror}", key="",
                        value=str(path)) from None


def _opened_path(fd: int, where: Path) -> str:
    """Where the file open as ``fd`` is, links resolved: the kernel's name for it, so it is the file being read."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc: the resolved name, if it is still the very file open (same device and inode)
        real = os.path.realpath(where)
        opened, named = os.fstat(fd), os.stat(real)
        if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
            raise OSError(0, "it changed while it was opened") from None
        return real


def _confined(spec: Path, folder: str, name: str, key: str, real: str) -> None:
    if os.path.commonpath([folder, real]) != folder:
        raise SpecError(f"spec key {key!r} names {name!r}, which resolves to {real!r}, outside the folder {folder!r} "
                        f"of spec file {str(spec)!r}; a spec's files must be inside its folder (links resolved): "
                        f"move the file there, or pass --allow-files-outside (cuctl submit, cuctl eval) for a spec "
                        f"you trust", key=key, value=repr(name), resolved=real, folder=folder,
                        option="--allow-files-outside")


def _read(spec: Path, folder: str | None, name: str, key: str) -> bytes:
    """The bytes of ``name`` (``folder``: the resolved folder it must be inside; None: anywhere)."""
    where = spec.parent / name  # an absolute name stays itself
    if folder is not None:
        _confined(spec, folder, name, key, os.path.realpath(where))  # refused before it is opened at all
    try:
        with open(where, "rb") as fh:
            if folder is not None:  # and what was opened, should a link have been swapped in meanwhile
                _confined(spec, folder, name, key, _opened_path(fh.fileno(), where))
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
