"""docs/layout.md's glossary names only what exists, each thing once, and the old names are gone.

The glossary is a table: a word, what it means, and the names that carry it in the code
(``cud.…``, imported here, or an attribute a class's methods set on ``self``), the config
(``table.key`` against each table's own key constant, :data:`tests.test_docs_complete.CONFIG_TABLES`)
and the protocol (a ``TypedDict`` of :mod:`cud.protocol`, or one of its fields). A rename that
leaves the glossary behind, a name in two rows or a word twice fails here. The renames that made
each word mean one thing are :mod:`tools/renames.py`; the last test checks that they leave
nothing to change, so code written with an old name (a merge, a habit) fails until it is renamed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import sys
import textwrap
import typing
from pathlib import Path
from types import ModuleType

import pytest

import cud.protocol
from cud.daemon.config import TOP_KEYS
from tests.test_docs_complete import CONFIG_TABLES

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "docs" / "layout.md"
COLUMNS = ("word", "means", "code", "config", "protocol")


def _renames() -> ModuleType:
    spec = importlib.util.spec_from_file_location("renames", ROOT / "tools" / "renames.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def glossary(text: str | None = None) -> list[dict[str, str]]:
    """The glossary's rows, each a dict by column (the table under ``## Glossary``)."""
    text = LAYOUT.read_text() if text is None else text
    section = text.split("\n## Glossary\n", 1)
    assert len(section) == 2, "docs/layout.md has no '## Glossary' section"
    lines = [line for line in section[1].split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert tuple(header) == COLUMNS, header
    rows = []
    for line in lines[2:]:  # after the header and its |---| line
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        assert len(cells) == len(COLUMNS), f"a glossary row needs {len(COLUMNS)} cells: {line}"
        rows.append(dict(zip(COLUMNS, cells, strict=True)))
    return rows


def names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _self_attributes(cls: type) -> set[str]:
    """The attributes a class's methods set on ``self`` (``self.x = …``, ``self.x: T = …``)."""
    found: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        for node in ast.walk(ast.parse(source)):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id == "self"):
                    found.add(target.attr)
    return found


def code_exists(name: str) -> bool:
    """``cud.a.b.C.attr``: the longest importable module, then attributes (or one a method sets on self)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif isinstance(obj, type) and attr in _self_attributes(obj):
                obj = None  # an instance attribute: nothing further to look into
            else:
                return False
        return True
    return False


def config_exists(name: str) -> bool:
    """A top-level key, or ``table.key`` with ``table`` a config table and ``key`` in its key constant."""
    if "." not in name:
        return name in TOP_KEYS
    table, key = name.rsplit(".", 1)
    for known in CONFIG_TABLES:
        if known.path.strip("[]") == table:
            return known.keys is None or key in known.keys
    return False


def protocol_exists(name: str) -> bool:
    """A ``TypedDict`` of cud.protocol, or ``TypedDict.field``."""
    kind, _, field = name.partition(".")
    message = getattr(cud.protocol, kind, None)
    if not (isinstance(message, type) and typing.is_typeddict(message)):
        return False
    return not field or field in message.__annotations__  # a TypedDict's holds every key, its bases' too


CHECKS = {"code": code_exists, "config": config_exists, "protocol": protocol_exists}


def problems(rows: list[dict[str, str]]) -> list[str]:
    """Everything wrong with the glossary's rows, in words."""
    found: list[str] = []
    words: dict[str, int] = {}
    where: dict[tuple[str, str], str] = {}
    for row in rows:
        word = row["word"]
        words[word] = words.get(word, 0) + 1
        if not row["means"]:
            found.append(f"{word!r} says nothing about what it means")
        if not any(names(row[column]) for column in CHECKS):
            found.append(f"{word!r} names no code, config key or protocol field")
        for column, exists in CHECKS.items():
            for name in names(row[column]):
                if not exists(name):
                    found.append(f"{word!r} names {column} {name!r}, which does not exist")
                if (column, name) in where:
                    found.append(f"{column} {name!r} is named by both {where[column, name]!r} and {word!r}")
                where[column, name] = word
    found += [f"the word {word!r} has {count} rows" for word, count in words.items() if count > 1]
    return found


def test_the_glossary_names_only_what_exists_and_each_thing_once() -> None:
    rows = glossary()
    assert len(rows) >= 30, "the glossary lost its rows"
    assert problems(rows) == []


@pytest.mark.parametrize("word", ["task", "step", "action", "seat", "session", "spec", "check", "verdict",
                                  "approval", "policy", "rule", "target", "guard", "budget", "record",
                                  "trajectory", "model", "request", "store", "dispatch", "attempt", "suite",
                                  "fleet", "node"])
def test_each_word_of_the_issue_has_its_row(word: str) -> None:
    assert word in {row["word"] for row in glossary()}


def test_the_checker_refuses_what_it_should() -> None:
    """The checks themselves: a name that is missing, named twice, or a word twice, is reported."""
    rows = [
        {"word": "a", "means": "x", "code": "`cud.daemon.seats.seat.Seat`", "config": "`guard.on_stuck`",
         "protocol": "`TaskView.guard`"},
        {"word": "a", "means": "y", "code": "`cud.daemon.seats.seat.Seat`, `cud.daemon.seats.seat.Seat.nothing_here`",
         "config": "`guard.no_key`, `no_key`", "protocol": "`TaskView.no_field`, `NoView`"},
    ]
    said = "\n".join(problems(rows))
    for expected in ("'a' has 2 rows", "named by both 'a' and 'a'", "'cud.daemon.seats.seat.Seat.nothing_here'",
                     "'guard.no_key'", "'no_key'", "'TaskView.no_field'", "'NoView'"):
        assert expected in said, said
    assert code_exists("cud.daemon.seats.seat.Seat.seat_config")  # set in __init__, found by ast


def test_the_old_names_are_gone_and_nothing_is_left_to_rename() -> None:
    renames = _renames()
    for retired in renames.RETIRED:
        module, _, attr = retired.partition(":")
        assert not code_exists(f"{module}.{attr}"), f"{retired} was renamed, yet it still exists"
    assert renames.move(check=True) == [], "a module is still at its old path (run tools/renames.py)"
    assert renames.rename(check=True) == {}, "code still uses an old name (run tools/renames.py)"
