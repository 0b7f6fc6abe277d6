"""Which specs a suite runs: the files and folders given, read and checked before anything is submitted.

A folder means the ``*.toml`` and ``*.json`` files directly in it (not its subfolders: fixtures and
scenarios live there), in name order, but for what is plainly not a spec: a hidden file (``.name``),
a well-known project file (:data:`NOT_SPECS`: ``pyproject.toml``, ``package.json``, ...) and what an
``--exclude GLOB`` matches (the file's name, or its path as found); each such file is named in a note,
never silently dropped. A file named on the command line is always taken. Every other file is a spec,
parsed with ``cud.spec.load`` (the code of ``cuctl submit --spec``) up front, so a bad one stops the
suite before its first task (exit 2), naming the file and the key: a broken spec is never skipped.

``--from-osworld``: the files are OSWorld task files, converted (cud.osworld.convert), and a file
may also be one of OSWorld's index files (``test_all.json``, ``test_small.json``: ``{"DOMAIN":
["ID", ...]}``, told from a task by its shape, :func:`osworld_index`): its tasks are
``examples/DOMAIN/ID.json`` beside it, named ``DOMAIN/ID``; one it lists that is not there stops
the suite, naming it. Each task has a domain: its index's key, else its folder's name (OSWorld
keeps them in ``examples/DOMAIN/``). A task that does not convert stops the suite too, unless
``skip_unconvertible`` (``--skip-unconvertible``): then it is :class:`Unconverted`, with why, and
the suite lists it as not converted (cud.suite.results), never drops it.
"""

from __future__ import annotations

import fnmatch
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cud.errors import ConfigError, NotConverted, SpecError
from cud.osworld.convert import SCREEN, load_osworld
from cud.spec.load import load_spec
from cud.spec.schema import Spec

__all__ = ("Planned", "Unconverted", "osworld_index", "plan", "plan_all", "reload")

SPEC_SUFFIXES = (".toml", ".json")
#: Files a project keeps beside its tests that are never specs: a folder's listing skips them, with a note.
NOT_SPECS = frozenset({
    "pyproject.toml", "Cargo.toml", "rust-toolchain.toml", "ruff.toml", "mypy.toml", "taplo.toml", "netlify.toml",
    "package.json", "package-lock.json", "tsconfig.json", "jsconfig.json", "composer.json", "deno.json",
    "bower.json", "lerna.json", "pyrightconfig.json", "renovate.json", "tslint.json", "manifest.json",
})
#: ``--from-osworld``: the files are OSWorld task configs (JSON), converted as ``submit --from-osworld`` does.
OSWORLD_SUFFIXES = (".json",)
#: Where an OSWorld index's tasks are, beside it: ``examples/DOMAIN/ID.json``.
OSWORLD_EXAMPLES = "examples"


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
    domain: str | None = None  # an OSWorld task's domain (--from-osworld), else None


@dataclass(frozen=True)
class Unconverted:
    """An OSWorld task that does not convert, kept under ``--skip-unconvertible``: the suite lists it, with why."""

    name: str
    path: Path
    domain: str
    error: NotConverted


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

    ``osworld``: the files are OSWorld tasks (or its index files), converted (downloads fetched here, never by a
    seat). ``exclude``: globs of a folder's files that are not specs; ``note`` hears each file a folder's listing
    skips.
    """
    return [p for p in plan_all(paths, tags, osworld=osworld, allow_outside=allow_outside, exclude=exclude,
                                note=note, as_written=as_written, screen=screen) if isinstance(p, Planned)]


def plan_all(paths: Sequence[str], tags: Sequence[str] = (), *, osworld: bool = False,
             skip_unconvertible: bool = False, allow_outside: bool = False, exclude: Sequence[str] = (),
             note: Callable[[str], None] = lambda _: None, as_written: bool = False,
             screen: tuple[int, int] = SCREEN) -> list[Planned | Unconverted]:
    """:func:`plan`, and with ``skip_unconvertible`` (OSWorld tasks only) each task that does not convert as
    :class:`Unconverted` in its place, instead of stopping: every task found is in the list, in the order found."""
    if skip_unconvertible and not osworld:
        raise ConfigError("--skip-unconvertible is for OSWorld tasks: give it with --from-osworld",
                          key="skip_unconvertible")
    found = _found(paths, osworld, exclude, note)
    seen: dict[Path, str] = {}
    planned: list[Planned | Unconverted] = []
    for name, path, domain in found:
        absolute = path.resolve()
        if absolute in seen:
            continue  # named twice (a file and its folder): run once
        seen[absolute] = name
        try:
            spec, files = _loader(osworld, allow_outside, as_written, screen)(path)
        except SpecError as exc:
            if not (osworld and skip_unconvertible):
                raise SpecError(f"{name}: {exc.message}", **{**exc.details, "spec": name}) from None
            # The tags its conversion would have given it (cud.osworld.convert: osworld and its id, its file's name).
            if tags and not set(tags) & {"osworld", path.stem}:
                continue
            why = exc.message.removeprefix(f"{path}: ")
            planned.append(Unconverted(name, absolute, domain or "",
                                       NotConverted(why, **{**exc.details, "spec": name})))
            continue
        if tags and not set(tags) & set(spec.tags):
            continue
        planned.append(Planned(name, absolute, spec, files, domain))
    if not planned:
        what = f" with a tag of {', '.join(tags)}" if tags else ""
        raise ConfigError(f"no spec{what} in {', '.join(paths)}", paths=list(paths))
    return planned


def _found(paths: Sequence[str], osworld: bool, exclude: Sequence[str],
           note: Callable[[str], None]) -> list[tuple[str, Path, str | None]]:
    """Each file to plan: its name, its path, and (OSWorld) its domain."""
    suffixes = OSWORLD_SUFFIXES if osworld else SPEC_SUFFIXES
    found: list[tuple[str, Path, str | None]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            domain = path.resolve().name if osworld else None
            for p in sorted(path.iterdir()):
                if p.suffix not in suffixes or not p.is_file():
                    continue
                name = str(path / p.name)
                why = skipped_because(name, exclude)
                if why is None:
                    found.append((name, p, domain))
                else:
                    note(f"skipped {name}: {why}")
        elif path.is_file():
            index = osworld_index(path) if osworld else None
            if index is None:
                found.append((given, path, path.resolve().parent.name if osworld else None))
            else:
                found.extend(_indexed(given, path, index))
        else:
            raise ConfigError(f"{given!r} is neither a spec file nor a folder of them", path=given)
    return found


def osworld_index(path: Path) -> dict[str, list[str]] | None:
    """The tasks ``path`` lists by domain if it is an OSWorld index file (a JSON object whose every value is a
    list: a task has an ``instruction`` string), else None (a task file, or not JSON: its conversion says why).
    An index whose lists hold anything but task ids is refused, naming the entry."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or not data or not all(isinstance(ids, list) for ids in data.values()):
        return None
    for domain, ids in data.items():
        for i, task in enumerate(ids):
            if not _plain_name(task) or not _plain_name(domain):
                raise ConfigError(f"OSWorld index {str(path)!r}: {domain}[{i}] is {task!r}, not a task id (an "
                                  f"index is {{\"DOMAIN\": [\"ID\", ...]}}, each task at "
                                  f"{OSWORLD_EXAMPLES}/DOMAIN/ID.json beside it)", path=str(path),
                                  key=f"{domain}[{i}]", value=repr(task))
    return data


def _plain_name(value: object) -> bool:
    """A domain or a task id: one path component (it names examples/DOMAIN/ID.json)."""
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\0" not in value


def _indexed(given: str, path: Path, index: dict[str, list[str]]) -> list[tuple[str, Path, str | None]]:
    """An index's tasks, ``DOMAIN/ID`` each; a task it lists whose file is missing is refused, naming it."""
    examples = path.parent / OSWORLD_EXAMPLES
    found: list[tuple[str, Path, str | None]] = []
    for domain, ids in index.items():
        for task in ids:
            file = examples / domain / f"{task}.json"
            if not file.is_file():
                raise ConfigError(f"OSWorld index {given!r} lists task {domain}/{task}, but {str(file)!r} is not "
                                  f"there", path=given, task=f"{domain}/{task}", value=str(file))
            found.append((f"{domain}/{task}", file, domain))
    return found


def reload(files: dict[str, str], *, osworld: bool = False, allow_outside: bool = False,
           as_written: bool = False, screen: tuple[int, int] = SCREEN,
           not_converted: Sequence[str] = ()) -> list[Planned]:
    """``--resume``: the suite's specs again, by the names and absolute paths results.json keeps (but the
    ``not_converted``: listed as such already, never run)."""
    planned = []
    for name, where in files.items():
        if name in not_converted:
            continue
        try:
            spec, data = _loader(osworld, allow_outside, as_written, screen)(Path(where))
        except SpecError as exc:
            raise SpecError(f"{name}: {exc.message}", **{**exc.details, "spec": name}) from None
        planned.append(Planned(name, Path(where), spec, data))
    return planned
