"""One error per cause: every error kind cud can send is a class in cud/errors.py, exported and documented.

The kinds are found from the code, not from a list kept here: every subclass of
``CudError`` anywhere in cud/, daemon/ and drivers/ (read statically, so a module
no test imports counts too), and every dict literal shaped like an error
(``{"kind": ..., "message": ...}``), which may not exist outside cud/errors.py:
the wire dict is made by ``CudError.to_dict`` only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import cud.errors as errors
from cud.errors import CudError

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("cud", "daemon", "drivers")
ERRORS_PY = ROOT / "cud" / "errors.py"
PROTOCOL_MD = ROOT / "docs" / "protocol.md"

#: CudError subclasses that may live outside cud/errors.py, and why: none sets a kind of its own.
ELSEWHERE = {
    "RemoteError": "cud.cuctl.client: the daemon's error as a client received it; its kind is what the daemon sent",
    "VersionMismatch": "cud.protocol: a ProtocolError that also carries the other side's version; sent as `protocol`",
    "WaitRanOut": "daemon/spec/setup.py: a setup wait that ran out; run_steps wraps it in SetupFailed, never sent",
    "StepFailed": "daemon/spec/setup.py: a setup step whose expectation was not met (the task's fault); run_steps "
                  "wraps it in SetupFailed with fault 'task', never sent",
}

#: Dict literals with "kind" and "message" outside cud/errors.py that are not error dicts made by hand:
#: (file, the "kind" value's source) -> why.
NOT_MADE_BY_HAND = {
    # A hook's approval payload: the kind is the approval's (action, budget), not an error kind.
    ("daemon/hooks/events.py", "approval['kind']"): "an approval's kind",
    # A hook's summary of a task's stored error (made by to_dict), its message truncated for the webhook.
    ("daemon/hooks/events.py", "error.get('kind')"): "a stored error, shortened",
}


def _files() -> list[Path]:
    return sorted(p for top in SOURCES for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)


def _trees() -> dict[str, ast.Module]:
    return {p.relative_to(ROOT).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in _files()}


def _error_classes(trees: dict[str, ast.Module]) -> dict[str, tuple[str, ast.ClassDef]]:
    """Every class that descends from CudError (by the names of its bases, transitively), by name."""
    classes = {node.name: (path, node) for path, tree in trees.items()
               for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    found: dict[str, tuple[str, ast.ClassDef]] = {"CudError": classes["CudError"]}
    grew = True
    while grew:
        grew = False
        for name, (path, node) in classes.items():
            bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                     for b in node.bases}
            if name not in found and bases & found.keys():
                found[name] = (path, node)
                grew = True
    return found


def _sets_kind(node: ast.ClassDef) -> bool:
    return any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "kind" for t in s.targets)
               for s in node.body)


def _classes_in_errors() -> dict[str, type[CudError]]:
    return {name: obj for name, obj in vars(errors).items()
            if isinstance(obj, type) and issubclass(obj, CudError) and obj.__module__ == errors.__name__}


def _documented() -> dict[str, str]:
    """docs/protocol.md's "Error kinds" table: kind -> the class its row names."""
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    section = text.split("\n## Error kinds\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| `([A-Za-z]+)`", section, flags=re.M)
    assert rows, "docs/protocol.md has no Error kinds table"
    assert len({kind for kind, _ in rows}) == len(rows), "a kind is documented twice"
    return dict(rows)


def test_every_error_class_is_in_errors_py() -> None:
    """A class that gives a cause its own kind lives in cud/errors.py; the few others are listed, with why."""
    found = _error_classes(_trees())
    stray = {name: path for name, (path, _) in found.items() if path != "cud/errors.py"}
    assert stray.keys() == ELSEWHERE.keys(), f"CudError subclasses outside cud/errors.py: {stray}; move them there"
    for name, path in stray.items():
        assert not _sets_kind(found[name][1]), f"{name} ({path}) sets a kind: it belongs in cud/errors.py"
    assert set(_classes_in_errors()) == {name for name, (path, _) in found.items() if path == "cud/errors.py"}


def test_every_error_class_is_exported() -> None:
    assert sorted(errors.__all__) == sorted(_classes_in_errors()), "cud.errors.__all__ is not its classes"
    assert len(errors.__all__) == len(set(errors.__all__))


def test_no_error_dict_is_made_by_hand() -> None:
    """Outside cud/errors.py no dict literal (nor dict(...) call) has "kind" and "message": use to_dict()."""
    made = []
    for path, tree in _trees().items():
        if path == "cud/errors.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = {k.value: v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant)}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
                keys = {k.arg: k.value for k in node.keywords if k.arg}
            else:
                continue
            if "kind" in keys and ("message" in keys or "details" in keys):
                where = (path, ast.unparse(keys["kind"]))
                if where not in NOT_MADE_BY_HAND:
                    made.append(f"{path}:{node.lineno}: kind {where[1]}")
    assert not made, f"error dicts made by hand (raise or build the cud.errors class, then .to_dict()): {made}"


def test_no_two_classes_share_a_kind() -> None:
    """Each kind names one cause. VersionMismatch shares `protocol` with its parent ProtocolError by design
    (it only adds the other side's version); RemoteError's kind is the daemon's, per instance."""
    by_kind: dict[str, list[str]] = {}
    for name, cls in _classes_in_errors().items():
        assert "kind" in vars(cls), f"{name} has no kind of its own: it would be sent as its parent's"
        assert re.fullmatch(r"[a-z][a-z_]*", cls.kind), f"{name}.kind {cls.kind!r} is not a lower_snake name"
        by_kind.setdefault(cls.kind, []).append(name)
    assert {kind: names for kind, names in by_kind.items() if len(names) > 1} == {}
    from cud.protocol import VersionMismatch

    assert VersionMismatch.kind == errors.ProtocolError.kind and issubclass(VersionMismatch, errors.ProtocolError)


def test_every_kind_is_documented_with_its_class() -> None:
    documented = _documented()
    classes = {cls.kind: name for name, cls in _classes_in_errors().items()}
    assert documented == classes, (
        f"docs/protocol.md's Error kinds table and cud/errors.py differ: undocumented "
        f"{sorted(classes.keys() - documented.keys())}, no such kind {sorted(documented.keys() - classes.keys())}, "
        f"wrong class {sorted(k for k in documented.keys() & classes.keys() if documented[k] != classes[k])}")


def test_too_many_connections_is_a_protocol_error_of_its_own_kind() -> None:
    """It was sent as `protocol`: a client's ``except ProtocolError`` must still catch it."""
    assert issubclass(errors.TooManyConnections, errors.ProtocolError)
    assert errors.TooManyConnections.kind != errors.ProtocolError.kind
    error = errors.TooManyConnections("too many connections in progress", limit=6)
    assert error.to_dict() == {"kind": "too_many_connections", "message": "too many connections in progress",
                               "details": {"limit": 6}}
