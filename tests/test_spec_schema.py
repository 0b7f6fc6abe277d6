"""The spec's schema: random valid specs round-trip, and every mutation of one is refused naming key and value.

Valid specs are built at random with the path and the kind of every value they hold
(``Site``); a mutation replaces one value with a wrong type, an out-of-range number, a bad
regular expression or a path out of the home, or adds an unknown key (or misspells a known
one), and the error must be a SpecError whose ``details["key"]`` is that path and whose
message names it and the value. No display: parsing is the same code on both sides.
"""

from __future__ import annotations

import copy
import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.errors import ProtocolError, SpecError
from cud.osworld.catalog import METRICS
from cud.protocol import CHUNK_BYTES, encode, parse_request, request
from cud.spec import parse_spec
from cud.spec.load import load_spec
from cud.spec.values import shown
from cud.spec.wire import MAX_SPEC_FILE_BYTES, file_pieces, spec_from_request, submit_fields

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Site:
    """A value of a spec: where it is, and what it must be (which bad values to try there)."""

    path: Path_
    kind: str  # text, match, home, local, argv, bool, tag, list, or "number:LOW:HIGH", "int:LOW:HIGH"


def key_path(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


# -- valid specs, with their sites --------------------------------------------------------------
WORD = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    lambda s: s.strip() and not s.startswith("re:"))
PLAIN = st.text("abcdefgh-_.", min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))
HOME = st.lists(PLAIN, min_size=1, max_size=3).map("/".join)
REGEX = st.sampled_from(["re:^a", "re:(?m)^done$", "re:[0-9]+", "re:(?i)saved", "re:."])
MATCH = st.one_of(WORD, REGEX)
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)
ARGV = st.lists(WORD, min_size=1, max_size=4)


class Builder:
    def __init__(self, draw: Any) -> None:
        self.draw = draw
        self.sites: list[Site] = []

    def put(self, table: dict[str, Any], path: Path_, key: str, value: Any, kind: str) -> None:
        table[key] = value
        self.sites.append(Site((*path, key), kind))
        if kind in ("argv", "list:tag", "list:home", "list:text", "list:state"):
            for index in range(len(value)):
                item = {"argv": "text" if index == 0 else "arg", "list:tag": "tag", "list:home": "home",
                        "list:text": "text", "list:state": "state"}[kind]
                self.sites.append(Site((*path, key, index), item))

    def maybe(self) -> bool:
        return bool(self.draw(st.booleans()))

    def wait_for(self, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        keys = ("window_class", "window_title") if self.maybe() else ("app", "role", "name")
        for key in self.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True)):
            self.put(out, path, key, self.draw(MATCH), "match")
        if self.maybe():
            self.put(out, path, "timeout", self.draw(st.floats(0.1, 300)), "number:0:300")
        return out

    def step(self, path: Path_) -> dict[str, Any]:
        kind = self.draw(st.sampled_from(["files", "run", "launch", "open", "clipboard", "sleep"]))
        out: dict[str, Any] = {}
        if kind == "files":
            copies = []
            for index in range(self.draw(st.integers(1, 3))):
                copy_: dict[str, Any] = {}
                where = (*path, "files", index)
                self.put(copy_, where, "src", self.draw(HOME), "local")
                self.put(copy_, where, "dest", self.draw(HOME), "home")
                if self.maybe():
                    self.put(copy_, where, "mode", self.draw(st.integers(0, 0o777)), "int:0:511")
                copies.append(copy_)
            out["files"] = copies
            self.sites.append(Site((*path, "files"), "list"))
        elif kind in ("run", "launch"):
            self.put(out, path, kind, self.draw(ARGV), "argv")
            if kind == "run" and self.maybe():
                self.put(out, path, "timeout", self.draw(st.integers(1, 600)), "number:0:600")
            if kind == "run" and self.maybe():
                self.put(out, path, "exit_code", self.draw(st.integers(0, 255)), "int:0:255")
        elif kind == "open":
            self.put(out, path, "open", self.draw(HOME), "home")
        elif kind == "clipboard":
            out["clipboard"] = self.draw(st.text(max_size=20).filter(lambda s: "\x00" not in s))
        else:
            self.put(out, path, "sleep", self.draw(st.floats(0.01, 60)), "number:0:60")
        if kind in ("launch", "open") and self.maybe():
            out["wait_for"] = self.wait_for((*path, "wait_for"))
            self.sites.append(Site((*path, "wait_for"), "table"))
        return out

    def check(self, path: Path_) -> dict[str, Any]:
        kind = self.draw(st.sampled_from(["command", "file", "element", "window", "answer", "metric"]))
        out: dict[str, Any] = {}
        if self.maybe():
            self.put(out, path, "name", self.draw(WORD), "text")
        if self.maybe():
            self.put(out, path, "weight", self.draw(st.floats(0.001, 1000)), "number:0:1000")
        if kind == "command":
            self.put(out, path, "command", self.draw(ARGV), "argv")
            if self.maybe():
                output: dict[str, Any] = {}
                where = (*path, "output")
                self.put(output, where, "include", self.draw(st.lists(WORD, max_size=3)), "list:text")
                if self.maybe():
                    self.put(output, where, "matches", self.draw(MATCH), "match")
                out["output"] = output
                self.sites.append(Site(where, "table"))
        elif kind == "file":
            self.put(out, path, "file", self.draw(HOME), "home")
            if self.maybe():
                self.put(out, path, "exists", False, "bool")
            else:
                if self.maybe():
                    self.put(out, path, "matches", self.draw(MATCH), "match")
                if self.maybe():
                    self.put(out, path, "sha256", "ab" * 32, "sha")
                if self.maybe():
                    self.put(out, path, "equals", self.draw(HOME), "local")
        elif kind in ("element", "window"):
            keys = ("app", "role", "name") if kind == "element" else ("class", "title")
            where_table: dict[str, Any] = {}
            for key in self.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True)):
                self.put(where_table, (*path, kind), key, self.draw(MATCH), "match")
            out[kind] = where_table
            self.sites.append(Site((*path, kind), "table"))
            if kind == "element" and self.maybe():
                self.put(out, path, "text", self.draw(MATCH), "match")
                self.put(out, path, "states", self.draw(st.lists(st.sampled_from(["checked", "!focused", "showing"]),
                                                                 min_size=1, max_size=2)), "list:state")
            if self.maybe():
                self.put(out, path, "exists", True, "bool")
        elif kind == "metric":
            self.metric(out, path)
        else:
            self.put(out, path, "answer", self.draw(MATCH), "match")
        return out

    def metric(self, out: dict[str, Any], path: Path_) -> None:
        name = self.draw(st.sampled_from(sorted(METRICS)))
        self.put(out, path, "metric", name, "metric")
        for role in ("result", "expected") if METRICS[name].expected else ("result",):
            where = (*path, role)
            arg: dict[str, Any] = {}
            kind = self.draw(st.sampled_from(["file", "command", "fixture", "value"]))
            site = {"file": "home", "command": "argv", "fixture": "local", "value": "json"}[kind]
            self.put(arg, where, kind, self.draw(JSON) if kind == "value" else self.draw(
                {"file": HOME, "command": ARGV, "fixture": HOME}[kind]), site)
            out[role] = arg
            self.sites.append(Site(where, "table"))
        if METRICS[name].options and self.maybe():
            where = (*path, "options")
            options: dict[str, Any] = {}
            for key in self.draw(st.lists(st.sampled_from(sorted(METRICS[name].options)), min_size=1, max_size=3,
                                          unique=True)):
                self.put(options, where, key, self.draw(JSON), "json")
            out["options"] = options
            self.sites.append(Site(where, "table"))
        if self.maybe():
            self.put(out, path, "timeout", self.draw(st.floats(0.5, 600)), "number:0:600")


@st.composite
def specs(draw: Any) -> tuple[dict[str, Any], list[Site]]:
    b = Builder(draw)
    raw: dict[str, Any] = {}
    b.put(raw, (), "prompt", draw(WORD), "text")
    if b.maybe():
        b.put(raw, (), "seat", draw(st.sampled_from(["any", "s1", "seat-2"])), "seat")
    if b.maybe():
        b.put(raw, (), "screen", draw(st.builds("{}x{}".format, st.integers(1, 32767), st.integers(1, 32767))),
              "screen")
    if b.maybe():
        b.put(raw, (), "seat_tags", draw(st.lists(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,10}", fullmatch=True),
                                                  max_size=4)), "list:tag")
    if b.maybe():
        b.put(raw, (), "max_steps", draw(st.integers(1, 10_000)), "int:1:10000")
    if b.maybe():
        b.put(raw, (), "max_duration", draw(st.integers(1, 604_800)), "int:1:604800")
    if b.maybe():
        b.put(raw, (), "approval", draw(st.sampled_from(["safety", "actions"])), "approval")
    if b.maybe():
        b.put(raw, (), "repeat_limit", draw(st.integers(0, 1000)), "int:0:1000")
    if b.maybe():
        b.put(raw, (), "cycle_limit", draw(st.integers(0, 20)), "int:0:20")
    if b.maybe():
        b.put(raw, (), "on_stuck", draw(st.sampled_from(["ask", "fail"])), "on_stuck")
    if b.maybe():
        b.put(raw, (), "tags", draw(st.lists(st.from_regex(r"[a-z][a-z0-9_.:-]{0,10}", fullmatch=True),
                                             max_size=3)), "list:tag")
    if b.maybe():
        b.put(raw, (), "reset", b.maybe(), "bool")
    raw["setup"] = [b.step(("setup", i)) for i in range(draw(st.integers(0, 3)))]
    raw["checks"] = [b.check(("checks", i)) for i in range(draw(st.integers(0, 4)))]
    if b.maybe():  # the same step tables after the model, under their own key path
        raw["postconfig"] = [b.step(("postconfig", i)) for i in range(draw(st.integers(0, 3)))]
    if b.maybe():
        b.put(raw, (), "pass_if", draw(st.sampled_from(["all", "any"])), "pass_if")
    if b.maybe():
        raw["collect"] = {}
        b.put(raw["collect"], ("collect",), "files", draw(st.lists(HOME, max_size=3)), "list:home")
    return raw, b.sites


# -- bad values per kind ------------------------------------------------------------------------
def bad_values(kind: str) -> st.SearchStrategy[Any]:
    if kind.startswith("list:"):
        kind = "list"
    if kind.startswith(("number:", "int:")):
        name, low, high = kind.split(":")
        wrong = [float(high) + 1, -1, float("nan"), float("inf"), "5", None]
        wrong += [0] if name == "number" or int(low) > 0 else []
        wrong += [1.5, True] if name == "int" else [True]
        if name == "int":
            wrong.append(int(high) + 1)
        return st.sampled_from(wrong)
    return st.sampled_from({
        "text": [5, None, "", "   ", ["x"], "a\x00b"],
        "match": [5, None, ["x"], "re:(", "re:[a-", "re:*"],
        "home": ["../x", "/etc/passwd", "a/../../b", "a//b", "./a", "a/", "~/x", "a\nb", 7, ""],
        "local": [5, None, ""],
        "arg": [5, None, "a\x00b", ["x"]],  # an argument after the first may be empty
        "argv": [5, "ls -l", None],
        "bool": ["yes", 1, None],
        "tag": ["has space", "-lead", "", 5],
        "list": ["x", 5, {}],
        "table": ["x", 5, []],
        "sha": ["AB" * 32, "ab" * 31, "zz" * 32],
        "seat": ["", "a b", 5],
        "screen": ["12x", "0x0", "1280X800", "01280x800", "32768x10", "1280x800 ", 1280, None],
        "approval": ["never", 5],
        "on_stuck": ["pray", 5, None],
        "pass_if": ["some", "ALL", "", 1, None, ["any"], True],
        "state": ["focussed", "!nope", 5],
        "metric": ["compare_tabel", "no_such_metric", "", 5, None],
        "json": [float("nan"), float("inf"), datetime.date(2026, 12, 6), datetime.time(20, 0), {1: "x"}],
    }[kind])


def assert_refused(raw: dict[str, Any], path: str, value: object) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    error = caught.value
    assert error.details["key"] == path, (error.message, path)
    assert repr(path) in error.message, error.message
    assert error.details["value"] == shown(value) or repr(value)[:40] in error.message, error.message
    return error


def set_at(raw: dict[str, Any], path: Path_, value: Any) -> None:
    target: Any = raw
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


@settings(max_examples=400, deadline=None)
@given(specs())
def test_valid_specs_parse_and_round_trip(built: tuple[dict[str, Any], list[Site]]) -> None:
    raw, _sites = built
    spec = parse_spec(raw)
    assert parse_spec(spec.to_dict()) == spec
    assert parse_spec(json.loads(json.dumps(spec.to_dict()))) == spec
    # Over the socket: the request the client sends parses back to the same spec on the daemon's side.
    files = {name: name.encode() for name in spec.local_files()}
    sent = json.loads(encode(request("submit", **submit_fields(spec, files))))
    assert spec_from_request(sent) == (spec, {name: len(data) for name, data in files.items()})


@settings(max_examples=600, deadline=None)
@given(specs(), st.data())
def test_every_bad_value_is_refused_naming_its_key_and_value(built: tuple[dict[str, Any], list[Site]],
                                                             data: st.DataObject) -> None:
    raw, sites = built
    site = data.draw(st.sampled_from(sites))
    value = data.draw(bad_values(site.kind))
    mutated = copy.deepcopy(raw)
    set_at(mutated, site.path, value)
    assert_refused(mutated, key_path(site.path), value)


@settings(max_examples=300, deadline=None)
@given(specs(), st.data())
def test_unknown_and_misspelt_keys_are_refused_with_a_suggestion(built: tuple[dict[str, Any], list[Site]],
                                                                 data: st.DataObject) -> None:
    raw, sites = built
    tables: list[Path_] = [(), *[s.path for s in sites if s.kind == "table"],
                           *[("setup", i) for i in range(len(raw["setup"]))],
                           *[("postconfig", i) for i in range(len(raw.get("postconfig", [])))],
                           *[("checks", i) for i in range(len(raw["checks"]))]]
    where = data.draw(st.sampled_from(tables))
    table: Any = raw
    for part in where:
        table = table[part]
    mutated_raw = copy.deepcopy(raw)
    target: Any = mutated_raw
    for part in where:
        target = target[part]
    known = [k for k in table if len(k) >= 5]
    if known and data.draw(st.booleans()):
        original = data.draw(st.sampled_from(known))
        cut = data.draw(st.integers(0, len(original) - 1))
        typo = original[:cut] + original[cut + 1:]  # one letter dropped: still near the original
        target[typo] = target.pop(original)
        error = assert_refused(mutated_raw, key_path((*where, typo)), typo)
        assert "did you mean" in error.message and error.details["suggestion"]
    else:
        name = data.draw(st.from_regex(r"zz[a-z]{3,8}", fullmatch=True))
        target[name] = 1
        assert_refused(mutated_raw, key_path((*where, name)), name)


@example("re:\x00")  # found: refused as text with a NUL before it is compiled
@example("re:[[")  # found: Python's FutureWarning "possible nested set" is not an error; it compiles
@example("re:(?P<x>a)(?P<x>b)")
@example("re:a{2,1}")
@given(st.text(min_size=1, max_size=20).map(lambda s: "re:" + s))
def test_any_regex_is_compiled_at_parse_time_or_refused_by_name(pattern: str) -> None:
    raw = {"prompt": "p", "checks": [{"answer": pattern}]}
    try:
        spec = parse_spec(raw)
    except SpecError as exc:
        assert exc.details["key"] == "checks[0].answer"
        assert "not a regular expression" in exc.message or "without NUL" in exc.message, exc.message
    else:
        assert spec.checks[0].answer is not None and spec.checks[0].answer.regex is not None


def test_regression_an_element_check_without_states_round_trips() -> None:
    # Found by the kinds test: the normal form wrote "states": [], which does not parse (a list of at least one).
    spec = parse_spec({"prompt": "p", "checks": [{"element": {"role": "text"}, "text": ""}]})
    assert parse_spec(spec.to_dict()) == spec


def test_defaults_and_what_acts_in_the_session() -> None:
    bare = parse_spec({"prompt": "look", "checks": [{"window": {"class": "X"}}]})
    assert bare.reset is True and bare.seat is None and bare.checks[0].weight == 1 and bare.in_session() == []
    assert parse_spec({"prompt": "look"}).reset is False and not parse_spec({"prompt": "look"}).needs_session
    both = parse_spec({"prompt": "p", "seat": "s1", "setup": [{"sleep": 1}, {"run": ["/bin/true"]}],
                       "checks": [{"file": "a"}, {"answer": "x"}], "collect": {"files": ["a"]}})
    assert both.in_session() == ["setup[1].run", "checks[0].file", "collect.files"]
    assert both.to_dict()["seat"] == "s1" and both.task_fields()["seat"] == "s1"


@pytest.mark.parametrize(("raw", "key", "words"), [
    ({}, "prompt", "spec key 'prompt' is missing"),
    ({"prompt": "p", "setup": [{"run": ["a"], "launch": ["b"]}]}, "setup[0]", "exactly one of files, run"),
    ({"prompt": "p", "setup": [{"timeout": 3}]}, "setup[0]", "it has none"),
    ({"prompt": "p", "setup": [{"launch": ["a"], "timeout": 3}]}, "setup[0].timeout", "known here: launch, wait_for"),
    ({"prompt": "p", "setup": [{"launch": ["a"], "wait_for": {"timeout": 3}}]}, "setup[0].wait_for", "not neither"),
    ({"prompt": "p", "setup": [{"open": "a", "wait_for": {"app": "x", "window_class": "y"}}]}, "setup[0].wait_for",
     "not both"),
    ({"prompt": "p", "setup": [{"files": [{"src": "a"}]}]}, "setup[0].files[0].dest", "given"),
    ({"prompt": "p", "setup": [{"files": [{"src": "a", "dest": "b", "mode": 0o4755}]}]}, "setup[0].files[0].mode",
     "a file mode from 0o0 to 0o777 (setuid, setgid and sticky bits are not set), got 0o4755"),
    ({"prompt": "p", "checks": [{"file": "a", "exists": False, "sha256": "ab" * 32}]}, "checks[0].sha256",
     "'exists = false' expects nothing"),
    ({"prompt": "p", "checks": [{"window": {}}]}, "checks[0].window", "at least one of class, title"),
    ({"prompt": "p", "rules": "ask"}, "rules", "list of at most 64 rule objects"),
    ({"prompt": "p", "checks": [{"element": {"role": "x"}, "states": ["focussed"]}]}, "checks[0].states[0]",
     "did you mean 'focused'?"),
])
def test_structural_mistakes_name_the_key(raw: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    assert caught.value.details["key"] == key and words in caught.value.message, caught.value.message


# -- files from the submitter's side, and the daemon's boundary -------------------------------------
def test_a_spec_file_reads_its_files_relative_to_its_folder(tmp_path: Path) -> None:
    (tmp_path / "fx").mkdir()
    (tmp_path / "fx" / "notes.txt").write_bytes(b"\x00binary\xff")
    (tmp_path / "s.toml").write_text('prompt = "p"\n[[setup]]\nfiles = [{ src = "fx/notes.txt", dest = "n" }]\n'
                                     '[[checks]]\nfile = "n"\nequals = "fx/notes.txt"\n')
    spec, files = load_spec(tmp_path / "s.toml")
    assert files == {"fx/notes.txt": b"\x00binary\xff"}
    (tmp_path / "s.json").write_text(json.dumps(spec.to_dict()))
    assert load_spec(tmp_path / "s.json") == (spec, files)


@pytest.mark.parametrize(("text", "words"), [
    ('prompt = "p"\n[[setup]]\nfiles = [{ src = "absent.txt", dest = "n" }]',
     "spec key 'setup[0].files[0].src' names 'absent.txt', which cannot be read"),
    ('prompt = "p"\n[[setup]]\nfiles = [{ src = "big.bin", dest = "n" }]',
     f"larger than the {MAX_SPEC_FILE_BYTES} bytes a spec's file may have (MAX_SPEC_FILE_BYTES)"),
    ('prompt = "p"\ntags = [1979-05-27]', "spec key 'tags[0]' is the TOML date/time"),
    ('prompt = "p"\nsetup = [', "is not valid TOML"),
])
def test_spec_file_errors_name_the_key_and_the_cap(tmp_path: Path, text: str, words: str) -> None:
    with open(tmp_path / "big.bin", "wb") as big:  # sparse: refused by its size, never read
        big.truncate(MAX_SPEC_FILE_BYTES + 1)
    (tmp_path / "s.toml").write_text(text)
    with pytest.raises(SpecError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_spec(tmp_path / "s.toml")


def test_a_spec_sends_its_files_sizes_and_then_their_bytes_in_pieces_of_one_file_each() -> None:
    names = ["a", "b", "empty", "c"]
    files = {"a": b"a" * (CHUNK_BYTES + 1), "b": b"b" * CHUNK_BYTES, "empty": b"", "c": b"c" * 3}
    spec = parse_spec({"prompt": "p", "setup": [{"files": [{"src": n, "dest": n} for n in names]}]})
    fields = submit_fields(spec, files)
    assert fields["files"] == {"a": CHUNK_BYTES + 1, "b": CHUNK_BYTES, "empty": 0, "c": 3}
    assert [len(piece) for piece in file_pieces(files)] == [CHUNK_BYTES, 1, CHUNK_BYTES, 3]
    assert b"".join(file_pieces(files)) == b"".join(files.values())
    with pytest.raises(ProtocolError, match="an object of file names to their sizes in bytes"):
        parse_request({**request("submit", **fields), "files": {"a": "YQ=="}})  # an older cuctl's base64


@pytest.mark.parametrize(("files", "words"), [
    ({}, "lacks 'a.txt'"),
    ({"a.txt": 1, "b.txt": 1}, "has 'b.txt', which the spec does not name"),
])
def test_the_daemon_takes_exactly_the_files_the_spec_names(files: dict[str, int], words: str) -> None:
    spec = parse_spec({"prompt": "p", "setup": [{"files": [{"src": "a.txt", "dest": "a"}]}]})
    sent = {**request("submit", **submit_fields(spec, {"a.txt": b"a"})), "files": files}
    with pytest.raises(SpecError, match=words):
        spec_from_request(sent)
