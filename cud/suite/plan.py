"""Which specs a suite runs: the files and folders given, read and checked before anything is submitted.

A folder means the ``*.toml`` and ``*.json`` files directly in it (not its subfolders: fixtures and
scenarios live there), in name order, but for what is plainly not a spec: a hidden file (``.name``),
a well-known project file (:data:`NOT_SPECS`: ``pyproject.toml``, ``package.json``, ...) and what an
``--exclude GLOB`` matches (the file's name, or its path as found); each such file is named in a note,
never silently dropped. A file named on the command line is always taken. Every other file is a spec,
parsed with ``cud.spec.load`` (the code of ``cuctl submit --spec``) up front, so a bad one stops the
suite before its first task (exit 2), naming the file and the key: a broken spec is never skipped.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cud.errors import ConfigError, SpecError
from cud.osworld.convert import SCREEN, load_osworld
from cud.spec.load import load_spec
from cud.spec.schema import Spec

__all__ = ("Planned", "plan", "reload")

SPEC_SUFFIXES = (".toml", ".json")
#: Files a project keeps beside its tests that are never specs: a folder's listing skips them, with a note.
NOT_SPECS = frozenset({
    "pyproject.toml", "Cargo.toml", "rust-toolchain.toml", "ruff.toml", "mypy.toml", "taplo.toml", "netlify.toml",
    "package.json", "package-lock.json", "tsconfig.json", "jsconfig.json", "composer.json", "deno.json",
    "bower.json", "lerna.json", "pyrightconfig.json", "renovate.json", "tslint.json", "manifest.json",
})
#: ``--from-osworld``: the files are OSWorld task configs (JSON), converted as ``submit --from-osworld`` does.
OSWORLD_SUFFIXES = (".json",)


def _loader(osworld: bool, allow_outside: bool, as_written: bool = False,
            screen: tuple[int, int] = SCREEN) -> Callable[[Path], tuple[Spec, dict[str, bytes]]]:
    """``allow_outside`` (``--allow-files-outside``): a spec's files may be outside its folder; ``as_written``: OSWorld
    tasks for seats that see their home at /home/user; ``screen``: their seats' screen (cud.osworld.convert)."""
    if osworld:
        return functools.partial(load_osworld, as_written=as_written, screen=screen)
    return functools.partial(load_spec, allow_outside=allow_outside)


@dataclass(frozen=True)
class Planned:
    name: str  # as results.json, the table and JUnit name it
    path: Path  # absolute: --resume reads it again from anywhere
    spec: Spec
    files: dict[str, bytes]


def skipped_because(name: str, exclude: Sequence[str]) -> str | None:
    """Why a file a folder lists is not a spec (``name``: its path as found), or None: it is one."""
    base = Path(name).name
    for pattern in exclude:
        if fnmatch.fnmatchcase(base, pattern) or fnmatch.fnmatchcase(name, pattern):
            return f"--exclude {pattern}"
    if base.startswith("."):
        return "a hidden file"
    if base in NOT_SPECS:
        return "a project file, not a spec"
    return None


def plan(paths: Sequence[str], tags: Sequence[str] = (), *, osworld: bool = False,
         allow_outside: bool = False, exclude: Sequence[str] = (),
         note: Callable[[str], None] = lambda _: None, as_written: bool = False,
         screen: tuple[int, int] = SCREEN) -> list[Planned]:
    """The specs under ``paths`` (with one of ``tags``, if given); SpecError names the file and the key.

    ``osworld``: the files are OSWorld tasks, converted (downloads fetched here, never by a seat).
    ``exclude``: globs of a folder's files that are not specs; ``note`` hears each file a folder's listing skips.
    """
    suffixes = OSWORLD_SUFFIXES if osworld else SPEC_SUFFIXES
    found: list[tuple[str, Path]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for p in sorted(path.iterdir()):
                if p.suffix not in suffixes or not p.is_file():
                    continue
                name = str(path / p.name)
                why = skipped_because(name, exclude)
                if why is None:
                    found.append((name, p))
                else:
                    note(f"skipped {name}: {why}")
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
            spec, files = _loader(osworld, allow_outside, as_written, screen)(path)
        except SpecError as exc:
            raise SpecError(f"{name}: {exc.message}", **{**exc.details, "spec": name}) from None
        if tags and not set(tags) & set(spec.tags):
            continue
        planned.append(Planned(name, absolute, spec, files))
    if not planned:
        what = f" with a tag of {', '.join(tags)}" if tags else ""
        raise ConfigError(f"no spec{what} in {', '.join(paths)}", paths=list(paths))
    return planned


def reload(files: dict[str, str], *, osworld: bool = False, allow_outside: bool = False,
           as_written: bool = False, screen: tuple[int, int] = SCREEN) -> list[Planned]:
    """``--resume``: the suite's specs again, by the names and absolute paths results.json keeps."""
    planned = []
    for name, where in files.items():
        try:
            spec, data = _loader(osworld, allow_outside, as_written, screen)(Path(where))
        except SpecError as exc:
            raise SpecError(f"{name}: {exc.message}", **{**exc.details, "spec": name}) from None
        planned.append(Planned(name, Path(where), spec, data))
    return planned
