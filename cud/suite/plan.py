"""Which specs a suite runs: the files and folders given, read and checked before anything is submitted.

A folder means the ``*.toml`` and ``*.json`` files directly in it (not its subfolders: fixtures and
scenarios live there), in name order. Every spec is parsed with ``cud.spec.load`` (the code of
``cuctl submit --spec``) up front, so a bad spec stops the suite before its first task (exit 2).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cud.errors import ConfigError, SpecError
from cud.spec.load import load_spec
from cud.spec.osworld import load_osworld
from cud.spec.schema import Spec

__all__ = ("Planned", "plan", "reload")

SPEC_SUFFIXES = (".toml", ".json")
#: ``--from-osworld``: the files are OSWorld task configs (JSON), converted as ``submit --from-osworld`` does.
OSWORLD_SUFFIXES = (".json",)


def _loader(osworld: bool, allow_outside: bool) -> Callable[[Path], tuple[Spec, dict[str, bytes]]]:
    """``allow_outside`` (``--allow-files-outside``): a spec's files may be outside its folder."""
    return load_osworld if osworld else functools.partial(load_spec, allow_outside=allow_outside)


@dataclass(frozen=True)
class Planned:
    name: str  # as results.json, the table and JUnit name it
    path: Path  # absolute: --resume reads it again from anywhere
    spec: Spec
    files: dict[str, bytes]


def plan(paths: Sequence[str], tags: Sequence[str] = (), *, osworld: bool = False,
         allow_outside: bool = False) -> list[Planned]:
    """The specs under ``paths`` (with one of ``tags``, if given); SpecError names the file and the key.

    ``osworld``: the files are OSWorld tasks, converted (downloads fetched here, never by a seat).
    """
    suffixes = OSWORLD_SUFFIXES if osworld else SPEC_SUFFIXES
    found: list[tuple[str, Path]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found += [(str(path / p.name), p) for p in sorted(path.iterdir()) if p.suffix in suffixes
                      and p.is_file()]
        elif path.is_file():
            found.append((given, path))
        else:
            raise ConfigError(f"{given!r} is neither a spec file nor a folder of them", path=given)
    seen: dict[Path, str] = {}
    planned: list[Planned] = []
    for name, path in found:
        absolute = path.resolve()
        if absolute in seen:
            continue  # named twice (a file and its folder): run once
        seen[absolute] = name
        try:
            spec, files = _loader(osworld, allow_outside)(path)
        except SpecError as exc:
            raise SpecError(f"{name}: {exc.message}", **{**exc.details, "spec": name}) from None
        if tags and not set(tags) & set(spec.tags):
            continue
        planned.append(Planned(name, absolute, spec, files))
    if not planned:
        what = f" with a tag of {', '.join(tags)}" if tags else ""
        raise ConfigError(f"no spec{what} in {', '.join(paths)}", paths=list(paths))
    return planned


def reload(files: dict[str, str], *, osworld: bool = False, allow_outside: bool = False) -> list[Planned]:
    """``--resume``: the suite's specs again, by the names and absolute paths results.json keeps."""
    planned = []
    for name, where in files.items():
        try:
            spec, data = _loader(osworld, allow_outside)(Path(where))
        except SpecError as exc:
            raise SpecError(f"{name}: {exc.message}", **{**exc.details, "spec": name}) from None
        planned.append(Planned(name, Path(where), spec, data))
    return planned
