"""The seat a task needs (#29): a screen size and tags, in a spec and in ``submit``, met the same way locally
and across a fleet (cud.seat_needs).

Without a display: the values' rules over random strings (the spec refuses a bad one naming key and value),
the Ray resources a spec asks for, a seat's tags in the config. With one: a daemon with two Xvfb seats of
different sizes and tags, where a task needing one waits for it while the other is free, a task that does
not care takes either, an impossible need is refused at submit, and the needs survive a restart. Tasks ask
for an approval before they type (policy ``actions``), which holds them running for as long as a test needs.
"""

from __future__ import annotations

import json
import shutil
import string
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.daemon.config import load_config
from cud.errors import ConfigError, SpecError
from cud.fleet.labels import seat_resources, spec_resources
from cud.scripted import ScriptedModel
from cud.seat_needs import SeatNeeds
from cud.spec import parse_spec
from cud.spec.wire import spec_from_request, submit_fields
from tests.support.daemon import Daemon, cuctl, json_out
from tests.support.recorder import wait_until
from tests.support.xserver import XServer, restart_xvfb, start_xvfb

TAG_FIRST = set(string.ascii_letters + string.digits)
TAG_REST = TAG_FIRST | set("_.:-")


# -- the rules, over random strings (an oracle written apart from cud.seat_needs) ------------------------
def screen_ok(text: str) -> bool:
    sides = text.split("x")
    return len(sides) == 2 and all(s.isascii() and s.isdigit() and s[0] != "0" and int(s) <= 32767 for s in sides)


def tag_ok(tag: object) -> bool:
    return (isinstance(tag, str) and 1 <= len(tag) <= 64 and tag[0] in TAG_FIRST
            and all(c in TAG_REST for c in tag[1:]))


SCREENS = st.one_of(
    st.text(max_size=12),
    st.builds("{}{}{}".format, st.integers(-5, 40_000), st.sampled_from(["x", "X", " x", "×", "x+", "xx"]),
              st.integers(-5, 40_000)),
    st.builds("{}x{}".format, st.text("0123456789٣", min_size=1, max_size=6), st.text("0123456789", max_size=6)),
)
TAGS = st.one_of(st.text(max_size=70), st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,66}", fullmatch=True))


@example("12x")
@example("0x0")
@example("01280x800")  # a leading zero: a seat advertises 1280x800, so this could never match
@example("32768x1")
@example("1280x800\n")  # fullmatch, not match-then-$: a newline at the end is not a size
@example("١٢٨٠x800")  # Arabic-Indic digits are digits to str.isdigit and to \d; not here
@example("1280x800")
@settings(max_examples=400, deadline=None)
@given(SCREENS)
def test_any_screen_is_taken_as_written_or_refused_naming_key_and_value(text: str) -> None:
    raw = {"prompt": "p", "screen": text}
    if screen_ok(text):
        spec = parse_spec(raw)
        assert spec.screen == text and parse_spec(spec.to_dict()) == spec
        assert submit_fields(spec, {})["screen"] == text
        return
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    assert caught.value.details["key"] == "screen"
    assert "spec key 'screen'" in caught.value.message and repr(text)[:40] in caught.value.message


@example(["chromium", "big"])
@example(["has space"])
@example(["-lead"])
@example([""])
@example(["x" * 65])
@example(["ok", "é"])  # non-ASCII letters are not a Ray resource name's
@example(["a"] * 17)  # one too many
@example(["a\n"])
@settings(max_examples=400, deadline=None)
@given(st.lists(TAGS, max_size=18))
def test_any_seat_tags_are_taken_as_written_or_refused_naming_key_and_value(tags: list[str]) -> None:
    raw = {"prompt": "p", "seat_tags": tags}
    if len(tags) <= 16 and all(tag_ok(t) for t in tags):
        spec = parse_spec(raw)
        assert spec.seat_tags == tuple(tags) and parse_spec(spec.to_dict()) == spec
        sent = {"type": "submit", "v": 1, **submit_fields(spec, {})}
        assert spec_from_request(sent)[0] == spec
        return
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    error = caught.value
    if len(tags) > 16:
        assert error.details["key"] == "seat_tags" and "at most 16 tags" in error.message
    else:
        index = next(i for i, t in enumerate(tags) if not tag_ok(t))
        assert error.details["key"] == f"seat_tags[{index}]", error.message
        assert f"spec key 'seat_tags[{index}]'" in error.message and repr(tags[index])[:40] in error.message


def test_a_spec_with_a_seat_screen_and_tags_round_trips_and_says_what_it_needs() -> None:
    spec = parse_spec({"prompt": "p", "seat": "b", "screen": "1280x800", "seat_tags": ["wide", "lab"]})
    assert spec.needs == SeatNeeds("b", "1280x800", ("wide", "lab"))
    assert spec.to_dict()["seat_tags"] == ["wide", "lab"] and parse_spec(spec.to_dict()) == spec
    assert {k: submit_fields(spec, {})[k] for k in ("seat", "screen", "seat_tags")} == {
        "seat": "b", "screen": "1280x800", "seat_tags": ["wide", "lab"]}
    plain = parse_spec({"prompt": "p"})
    assert plain.needs.any and "screen" not in submit_fields(plain, {}) and "seat_tags" not in submit_fields(plain, {})


def test_a_seat_meets_needs_by_name_screen_and_every_tag_and_an_unknown_screen_may() -> None:
    needs = SeatNeeds(None, "1280x800", ("wide", "lab"))
    assert needs.met_by("b", (1280, 800), ("lab", "wide", "x"))
    assert not needs.met_by("b", (1024, 768), ("lab", "wide"))
    assert not needs.met_by("b", (1280, 800), ("wide",))
    assert needs.met_by("b", None, ("wide", "lab"))  # unavailable now: its screen may be that size
    assert not SeatNeeds("a").met_by("b", (1280, 800), ())
    assert SeatNeeds().met_by("anything", None, ())


def test_a_spec_asks_ray_for_one_seat_of_each_label_it_needs() -> None:
    assert spec_resources(SeatNeeds()) == {"cud_seat": 1.0}
    assert spec_resources(SeatNeeds("any")) == {"cud_seat": 1.0}
    assert spec_resources(SeatNeeds("s2", "1280x800", ("wide", "gpu", "wide"))) == {
        "cud_seat": 1.0, "cud_seat_name:s2": 1.0, "cud_screen:1280x800": 1.0, "cud_tag:wide": 1.0, "cud_tag:gpu": 1.0}
    # What a seat offers, as the daemon's `seats` shows it: its own tags and the node's.
    seat = {"name": "s2", "size": [1280, 800], "tags": ["wide", "lab"]}
    assert seat_resources(seat, ("lab", "rack1")) == {
        "cud_seat": 1.0, "cud_seat_name:s2": 1.0, "cud_screen:1280x800": 1.0, "cud_tag:wide": 1.0,
        "cud_tag:lab": 1.0, "cud_tag:rack1": 1.0}


@pytest.mark.parametrize(("tags", "key"), [('["ok", "has space"]', "seats[1].tags[1]"), ('"wide"', "seats[1].tags"),
                                           ("[5]", "seats[1].tags[0]")])
def test_a_bad_seat_tag_in_the_config_names_its_key(tmp_path: Path, tags: str, key: str) -> None:
    path = tmp_path / "cud.toml"
    path.write_text(f'[[seats]]\nname = "a"\ndisplay = ":91"\n[[seats]]\nname = "b"\ndisplay = ":92"\ntags = {tags}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, {"socket": "/tmp/s", "state_dir": str(tmp_path)}, env={})
    assert caught.value.details["key"] == key and repr(key) in caught.value.message


def test_a_seat_s_tags_are_its_own_then_the_node_s(tmp_path: Path) -> None:
    path = tmp_path / "cud.toml"
    path.write_text('[fleet]\ntags = ["lab", "wide"]\n[[seats]]\nname = "a"\ndisplay = ":91"\n'
                    '[[seats]]\nname = "b"\ndisplay = ":92"\ntags = ["wide", "big"]\n')
    seats = load_config(path, {"socket": "/tmp/s", "state_dir": str(tmp_path)}, env={}).seats
    assert [s.tags for s in seats] == [("lab", "wide"), ("wide", "big", "lab")]


# -- a daemon with two seats -----------------------------------------------------------------------------
@dataclass
class TwoSeats:
    daemon: Daemon
    servers: dict[str, XServer]
    workdir: Path

    def seat(self, name: str) -> dict[str, Any]:
        return next(s for s in self.daemon.call("seats") if s["name"] == name)

    def held(self, task_id: int) -> str:
        """The seat of ``task_id``, once it waits for its approval (running there)."""
        self.daemon.wait_approval(task_id)
        return str(self.daemon.task(task_id)["seat"])

    def finish(self, *ids: int) -> list[str]:
        """Approve each task's one action and wait for it to succeed; the seats they ran on."""
        ran = []
        for task_id in ids:
            self.daemon.call("approve", id=self.daemon.wait_approval(task_id)["id"])
            ran.append(self.daemon.wait_state(task_id, "succeeded")["seat"])
        return ran


@pytest.fixture(scope="module")
def two() -> Iterator[TwoSeats]:
    workdir = Path(tempfile.mkdtemp(prefix="cud-", dir="/tmp"))
    servers: dict[str, XServer] = {}
    model = ScriptedModel({"name": "typing", "steps": [{"actions": [{"type": "screenshot"}]},
                                                        {"actions": [{"type": "type", "text": "?"}]},
                                                        {"message": "typed"}]})
    daemon = None
    try:
        for name, (width, height) in {"a": (1024, 768), "b": (1280, 800)}.items():
            (workdir / name).mkdir()
            servers[name] = start_xvfb(workdir / name, width, height)
        (workdir / "daemon").mkdir()
        config = (f'[fleet]\ntags = ["lab"]\n'
                  f'[[seats]]\nname = "a"\ndisplay = "{servers["a"].display}"\ntags = ["chromium"]\n'
                  f'[[seats]]\nname = "b"\ndisplay = "{servers["b"].display}"\ntags = ["wide"]\n')
        daemon = Daemon("", model.start(), workdir=workdir / "daemon", approval="actions", config=config, seats={})
        yield TwoSeats(daemon.start(), servers, workdir)
    finally:
        if daemon is not None:
            daemon.stop()
        model.stop()
        for server in servers.values():
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_task_waits_for_the_seat_it_needs_while_the_other_is_free(two: TwoSeats) -> None:
    daemon = two.daemon
    wait_until(lambda: two.seat("a")["size"] == [1024, 768] and two.seat("b")["size"] == [1280, 800], 30,
               "both seats measured")
    assert (two.seat("a")["tags"], two.seat("b")["tags"]) == (["chromium", "lab"], ["wide", "lab"])
    listed = cuctl(daemon.socket, "seats")
    assert "chromium,lab" in listed.stdout and "wide,lab" in listed.stdout, listed.stdout
    first = daemon.call("submit", prompt="on the big screen", screen="1280x800")["id"]
    assert two.held(first) == "b"
    # b is busy: a second task for the big screen waits, although a is free.
    second = json_out(cuctl(daemon.socket, "submit", "again big", "--screen", "1280x800", "--json"))["id"]
    assert daemon.task(second)["state"] == "queued" and two.seat("a")["state"] == "idle"
    shown = cuctl(daemon.socket, "show", str(second)).stdout
    assert "seat needs:    screen 1280x800" in shown, shown
    # A task that does not care takes the free seat; one needing a's tags (and the node's) queues behind it.
    anywhere = daemon.call("submit", prompt="anywhere")["id"]
    assert two.held(anywhere) == "a"
    spec = two.workdir / "chromium.toml"
    spec.write_text('prompt = "in chromium"\nseat_tags = ["chromium", "lab"]\nscreen = "1024x768"\n')
    tagged = json_out(cuctl(daemon.socket, "submit", "--spec", str(spec), "--json"))["id"]
    assert (daemon.task(tagged)["seat_tags"], daemon.task(tagged)["screen"]) == (["chromium", "lab"], "1024x768")
    # b frees first: it takes the big-screen task, never the one needing chromium, which waits for a.
    assert two.finish(first) == ["b"]
    assert two.held(second) == "b" and daemon.task(tagged)["state"] == "queued"
    assert two.finish(anywhere, tagged, second) == ["a", "a", "b"]
    # With a held by a task needing its tag, a task that does not care runs on b.
    on_a = json_out(cuctl(daemon.socket, "submit", "tagged", "--seat-tag", "chromium", "--json"))["id"]
    assert two.held(on_a) == "a"
    other = daemon.call("submit", prompt="anywhere again")["id"]
    assert two.held(other) == "b"
    assert two.finish(on_a, other) == ["a", "b"]


def test_a_need_no_seat_meets_is_refused_at_submit_naming_it(two: TwoSeats) -> None:
    daemon = two.daemon
    before = len(daemon.call("list"))
    offer = "its seats: a (screen 1024x768, tags chromium, lab); b (screen 1280x800, tags wide, lab)"
    for args, words in [
        (["--screen", "800x600"], "no seat of this daemon meets screen 800x600; " + offer),
        (["--seat-tag", "chromium", "--seat-tag", "wide"], "meets tags chromium, wide; " + offer),
        (["--seat", "a", "--screen", "1280x800"], "meets seat 'a', screen 1280x800; " + offer),
        (["--seat-tag", "gpu"], "meets tag gpu; " + offer),
        (["--screen", "12x"], "'submit' field 'screen' must be a screen size WIDTHxHEIGHT like '1280x800'"),
        (["--seat-tag", "ok", "--seat-tag", "has space"], "'submit' field 'seat_tags[1]' must be a tag"),
    ]:
        refused = cuctl(daemon.socket, "submit", "p", *args)
        assert refused.returncode == 2 and words in refused.stderr, (args, refused.stderr)
    spec = two.workdir / "huge.toml"
    spec.write_text('prompt = "p"\nscreen = "3840x2160"\n')
    refused = cuctl(daemon.socket, "submit", "--spec", str(spec))
    assert refused.returncode == 2 and "meets screen 3840x2160" in refused.stderr, refused.stderr
    assert len(daemon.call("list")) == before  # nothing was queued


def test_a_suite_on_chosen_seats_pins_each_spec_to_a_seat_that_meets_it(two: TwoSeats) -> None:
    daemon = two.daemon
    suite = two.workdir / "suite"
    suite.mkdir()
    # In name order, "big" comes first: on the first free seat of --seats (a), it would be refused.
    for name, needs in {"big": 'screen = "1280x800"\n', "chromium": 'seat_tags = ["chromium"]\n', "plain": ""}.items():
        (suite / f"{name}.toml").write_text(f'prompt = "{name}"\n{needs}reset = false\n[[checks]]\nanswer = "typed"\n')
    out = two.workdir / "suite-out"
    env = {k: v for k, v in daemon.env.items() if k != "OPENAI_API_KEY"}
    driver = subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "--socket", str(daemon.socket), "eval",
                               "--seats", "a,b", str(suite), "--out", str(out)], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def approved_to_the_end() -> bool:  # every task asks once before it types (policy actions)
            for approval in daemon.call("approvals"):
                daemon.call("approve", id=approval["id"])
            return driver.poll() is not None

        wait_until(approved_to_the_end, 120, "the suite to end")
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
        assert driver.stderr is not None
        stderr = driver.stderr.read().decode()
        driver.stderr.close()
    assert driver.returncode == 0, stderr
    runs = {Path(r["spec"]).name: r for r in json.loads((out / "results.json").read_text())["runs"]}
    assert {name: (r["seat"], r["outcome"]) for name, r in runs.items()} == {
        "big.toml": ("b", "passed"), "chromium.toml": ("a", "passed"),
        "plain.toml": (runs["plain.toml"]["seat"], "passed")}


def test_a_spec_no_seat_could_take_is_a_refused_run_with_or_without_seats(two: TwoSeats) -> None:
    """Without --seats the daemon refuses it at submit; with --seats cuctl eval does, before submitting: either way
    a failed run recorded as refused, with why, in results.json, JUnit and the run's line; never a usage error."""
    daemon = two.daemon
    suite = two.workdir / "impossible"
    suite.mkdir()
    for name, needs in {"big": 'screen = "1280x800"\n', "huge": 'screen = "3840x2160"\n', "on-b": 'seat = "b"\n'}.items():
        (suite / f"{name}.toml").write_text(f'prompt = "{name}"\n{needs}reset = false\n[[checks]]\nanswer = "x"\n')
    before = len(daemon.call("list"))
    for args, runs in [
        ((str(suite / "huge.toml"),), {"huge.toml": "no seat of this daemon meets screen 3840x2160; its seats: a "}),
        (("--seats", "a", str(suite)), {"big.toml": "big.toml needs screen 1280x800, which none of --seats a offers",
                                        "huge.toml": "huge.toml needs screen 3840x2160, which none of --seats a offers",
                                        "on-b.toml": "on-b.toml is pinned to seat 'b', which --seats a leaves out"}),
    ]:
        out, junit = two.workdir / f"out-{len(args)}", two.workdir / f"junit-{len(args)}.xml"
        done = cuctl(daemon.socket, "eval", *args, "--out", str(out), "--junit", str(junit))
        assert done.returncode == 1, (args, done.stderr)
        got = {Path(r["spec"]).name: r for r in json.loads((out / "results.json").read_text())["runs"]}
        assert {n: (r["state"], r["outcome"], r["judged"]) for n, r in got.items()} == \
            {n: ("refused", "failed", True) for n in runs}, got
        for name, why in runs.items():
            assert got[name]["error"]["kind"] == "not_found" and why in got[name]["error"]["message"], got[name]
            assert f"{name} #1: failed: refused: " in done.stderr and why in done.stderr, done.stderr
            assert why in junit.read_text()
    assert len(daemon.call("list")) == before  # nothing was queued


def test_a_restart_keeps_the_needs(two: TwoSeats) -> None:
    daemon = two.daemon
    holding = daemon.call("submit", prompt="hold b", seat_tags=["wide"])["id"]
    assert two.held(holding) == "b"
    waiting = daemon.call("submit", prompt="after b", screen="1280x800", seat_tags=["wide", "lab"])["id"]
    assert daemon.task(waiting)["state"] == "queued"
    daemon.stop()
    daemon.start()
    kept = daemon.task(waiting)
    assert (kept["screen"], kept["seat_tags"]) == ("1280x800", ["wide", "lab"])
    assert daemon.task(holding)["state"] == "interrupted"
    assert two.finish(waiting) == ["b"]


def test_a_seat_whose_screen_is_unknown_now_may_be_the_one_a_task_needs(two: TwoSeats) -> None:
    daemon = two.daemon
    two.servers["b"].kill()  # its number stays ours: b comes back only on our server
    wait_until(lambda: two.seat("b")["state"] == "unavailable", 30, "seat b unavailable")
    assert two.seat("b")["size"] is None
    # b's screen is unknown: it may be 1280x800, so the task is taken, and waits for b.
    waiting = daemon.call("submit", prompt="for b", screen="1280x800")["id"]
    assert daemon.task(waiting)["state"] == "queued" and two.seat("a")["state"] == "idle"
    two.servers["b"] = restart_xvfb(two.servers["b"])
    assert two.held(waiting) == "b"
    assert two.finish(waiting) == ["b"]


def test_fleet_join_tags_go_through_the_configs_check(tmp_path: Path) -> None:
    """``cud fleet join --tag`` is refused by the same rule, naming the item, before any Ray is started."""
    done = subprocess.run([sys.executable, "-m", "cud.daemon.main", "fleet", "join", "--address", "127.0.0.1:1",
                           "--socket", str(tmp_path / "s"), "--tag", "ok", "--tag", "bad tag!"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "config key '--tag[1]' must be a tag" in done.stderr and "'bad tag!'" in done.stderr, done.stderr
