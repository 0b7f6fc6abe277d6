"""CHANGELOG.md keeps up with the code: its versions are the code's, its releases in order.

Read from the files, never by importing cud: the versions are the source's own constants
(``PROTOCOL_VERSION`` in the shared library, ``SCHEMA_VERSION`` counting the daemon's
migrations), so the test judges this checkout whatever venv runs it.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHANGELOG = ROOT / "CHANGELOG.md"

#: A section: ``## Unreleased`` / ``## [Unreleased]``, or ``## [x.y.z] - YYYY-MM-DD``.
_SECTION = re.compile(r"^## (?:\[(?P<v>\d+\.\d+\.\d+)\] - (?P<date>\d{4}-\d{2}-\d{2})|\[?(?P<u>Unreleased)\]?)\s*$")
#: Every section states both versions in one line ("none" before the socket or the database existed).
_VERSIONS = re.compile(r"^Protocol version (?P<p>\d+|none), schema version (?P<s>\d+|none)\b")


def _sections() -> list[tuple[str, str | None, list[str]]]:
    """(version or "Unreleased", date, the section's lines) for each ``## `` section, in file order."""
    sections: list[tuple[str, str | None, list[str]]] = []
    for line in CHANGELOG.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            m = _SECTION.match(line)
            assert m, f"CHANGELOG.md: a section heading Keep a Changelog does not know: {line!r}"
            sections.append((m["v"] or "Unreleased", m["date"], []))
        elif sections:
            sections[-1][2].append(line)
    return sections


def _versions_of(lines: list[str], name: str) -> tuple[int | None, int | None]:
    found = [m for line in lines if (m := _VERSIONS.match(line))]
    assert len(found) == 1, f"CHANGELOG.md's {name} section needs one 'Protocol version N, schema version M' line"
    p, s = found[0]["p"], found[0]["s"]
    return (None if p == "none" else int(p)), (None if s == "none" else int(s))


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _protocol_version() -> int:
    """``PROTOCOL_VERSION = N`` wherever the shared library defines it (cud/protocol.py or cud/protocol/)."""
    pattern = re.compile(r"^PROTOCOL_VERSION\s*(?::\s*[\w\[\]]+\s*)?=\s*(\d+)\s*$", re.MULTILINE)
    values = {int(m[1]) for path in (ROOT / "cud").rglob("*.py") for m in pattern.finditer(path.read_text("utf-8"))}
    assert len(values) == 1, f"expected one PROTOCOL_VERSION = N under cud/, found {sorted(values)}"
    return values.pop()


def _schema_version() -> int:
    """``SCHEMA_VERSION``: a literal, or ``len(MIGRATIONS)`` counted from the module's MIGRATIONS tuple."""
    for path in sorted((ROOT / "daemon").rglob("*.py")):
        text = path.read_text("utf-8")
        if "SCHEMA_VERSION" not in text:
            continue
        assigned: dict[str, ast.expr] = {}
        for node in ast.parse(text).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                assigned[node.target.id] = node.value
        value = assigned.get("SCHEMA_VERSION")
        if value is None:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, int):
            return value.value
        counted = ast.unparse(value)
        assert counted == "len(MIGRATIONS)", f"{path}: SCHEMA_VERSION = {counted}, which this test cannot read"
        migrations = assigned.get("MIGRATIONS")
        assert isinstance(migrations, ast.Tuple), f"{path}: MIGRATIONS is not a literal tuple"
        return len(migrations.elts)
    raise AssertionError("no SCHEMA_VERSION under daemon/")


def test_first_section_has_the_codes_versions() -> None:
    name, _, lines = _sections()[0]
    assert _versions_of(lines, name) == (_protocol_version(), _schema_version()), (
        f"CHANGELOG.md's {name} section states other versions than the code's "
        f"(protocol {_protocol_version()}, schema {_schema_version()}): a protocol or schema change "
        "needs its entry and the section's 'Protocol version N, schema version M' line"
    )


def test_releases_in_order_and_versions_never_go_back() -> None:
    sections = _sections()
    names = [name for name, _, _ in sections]
    assert "Unreleased" not in names[1:], "Unreleased must be the first section"
    releases = [(name, date) for name, date, _ in sections if name != "Unreleased"]
    assert releases, "CHANGELOG.md has no release section"
    versions = [_release(name) for name, _ in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions), (
        f"release sections must be newest first, each once: {[name for name, _ in releases]}"
    )
    dates = [date for _, date in releases]
    assert dates == sorted(dates, reverse=True), f"release dates must go back in time down the file: {dates}"
    # Newest first: reading down, neither version may rise ("none" is older than any number).
    stated = [_versions_of(lines, name) for name, _, lines in sections]
    for kind, column in (("protocol", 0), ("schema", 1)):
        seen = [-1 if v[column] is None else v[column] for v in stated]
        assert seen == sorted(seen, reverse=True), f"the {kind} versions must not rise down the file: {seen}"


def test_latest_release_is_pyprojects_version_or_unreleased_is_above_it() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]
    sections = _sections()
    latest = next(name for name, _, _ in sections if name != "Unreleased")
    assert _release(latest) <= _release(version), f"CHANGELOG.md's {latest} is newer than pyproject's {version}"
    assert latest == version or sections[0][0] == "Unreleased", (
        f"pyproject.toml says {version} but CHANGELOG.md's latest release is {latest} and no Unreleased "
        "section is above it"
    )
