"""The stuck guard (docs/stuck.md) through the real daemon, the scripted model over the real SDK, and a
real GTK window (tests/support/forms/busy_gtk.py: menus, an entry, a download, a long list, a long document)
whose tree is on a real accessibility bus (at-spi-bus-launcher, tests/support/a11y.py).

One desktop, one window, one scripted model and one daemon for the module; each test (and
each Hypothesis example) is its own task with its own scenario (``scripted:NAME``), starting
from the window's ``reset``. A model that clicks one dead spot, or two in turn, trips the repeat
rule at exactly ``repeat_limit`` rounds; one that opens and closes one menu trips the cycle rule;
``ask`` brings it to a person, ``fail`` ends it ``stuck``. A model that types one character a step
into the entry long after it is full (it scrolls: the screen stays the same, pixel for pixel) is
making progress, which the entry's text on the accessibility bus shows. Random legitimate work
(typing, filling the entry and typing on one character a step, scrolling the list, waiting while a download
moves, opening and closing menus, paging the document) never trips either: the property counts
its runs and false alarms and prints the figure.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from cud.scripted import MODEL_PREFIX, ScriptedModel
from cud.scripted.scenario import parse_scenario
from tests.support.a11y import a11y_desktop
from tests.support.busy_app import BusyApp
from tests.support.daemon import Daemon, scenario

FINAL = ("succeeded", "failed", "cancelled", "stuck")
_names = itertools.count(1)


class Bench:
    """The module's window, model and daemon; ``run`` plays one scenario as one task."""

    def __init__(self, app: BusyApp, model: ScriptedModel, daemon: Daemon) -> None:
        self.app, self.model, self.daemon = app, model, daemon

    def submit(self, steps: list[dict[str, Any]], **guard: Any) -> int:
        name = f"stuck-{next(_names)}"
        self.model.scenarios[name] = parse_scenario(scenario(*steps, {"message": "done"}), source=name)
        self.app.reset()
        return int(self.daemon.call("submit", prompt="work", model=MODEL_PREFIX + name, **guard)["id"])

    def run(self, steps: list[dict[str, Any]], **guard: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        task_id = self.submit(steps, **guard)
        task = self.daemon.wait_state(task_id, *FINAL, timeout=120)
        return task, self.daemon.events(task_id)


@pytest.fixture(scope="module")
def bench() -> Iterator[Bench]:
    with a11y_desktop("cud-stuck-") as (desktop, bus):
        app = BusyApp(desktop, bus)
        app.start()
        model = ScriptedModel(scenario({"message": "done"}))
        daemon: Daemon | None = None
        try:
            # A roomy lookup time: a loaded machine must not make the entry's text unknown (the guard then
            # has the pixels alone, as on a seat without the bus).
            config = f'session_bus = "{bus.address}"\ntarget_timeout = 5\nmax_steps = 200\n'
            daemon = Daemon(desktop.display, model.start(), config=config)
            yield Bench(app, model, daemon.start())
        finally:
            if daemon is not None:
                daemon.cleanup()
            model.stop()
            app.stop()


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"actions": [{"type": "click", "button": "left", "x": point[0], "y": point[1]}]}


def key(*keys: str) -> dict[str, Any]:
    return {"actions": [{"type": "keypress", "keys": list(keys)}]}


def actions_run(events: list[dict[str, Any]], kind: str) -> int:
    return sum(1 for e in events if e["kind"] == "action" and e["data"]["action"]["type"] == kind)


def stuck_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == "stuck"]


@pytest.mark.parametrize("limit", [3, 5])
def test_the_same_click_on_a_static_screen_is_stuck_at_exactly_repeat_limit(bench: Bench, limit: int) -> None:
    still = bench.app.centre("still")
    task, events = bench.run([click(still)] * (limit + 3), repeat_limit=limit, on_stuck="fail")
    assert task["state"] == "stuck", task["error"]
    assert task["guard"] == {"repeat_limit": limit, "cycle_limit": 4, "on_stuck": "fail"}  # the rest: [guard]'s
    (stuck,) = stuck_events(events)
    assert (stuck["rule"], stuck["times"]) == ("repeat", limit), stuck
    assert f"click left at ({still[0]}, {still[1]}) on an unchanged screen {limit} times" in stuck["message"]
    # The limit-th click is the one stopped: it never ran.
    assert actions_run(events, "click") == limit - 1
    assert task["error"]["kind"] == "stuck" and "on_stuck is 'fail'" in task["error"]["message"]


def test_a_model_opening_and_closing_one_menu_trips_the_cycle_rule(bench: Bench) -> None:
    menu = bench.app.centre("menu:File")
    # The repeat rule, which sees the same two actions too once the screens come back, is left out of it.
    task, events = bench.run([click(menu), key("ESC")] * 10, cycle_limit=3, repeat_limit=50, on_stuck="fail")
    assert task["state"] == "stuck", task["error"]
    (stuck,) = stuck_events(events)
    assert (stuck["rule"], stuck["period"], stuck["times"]) == ("cycle", 2, 3), stuck
    # Three rounds of two screens: the sixth action is the one stopped, or a later one where a screenshot
    # showed the screen from before its action. The driver's settle (two equal frames 20 ms apart) can end
    # before GTK has even handled the click or the Escape on a loaded machine: the model is then sent a menu
    # still open, and that round is not the one before. The count to the exact action: test_stuck_guard.py.
    ran = actions_run(events, "click") + actions_run(events, "keypress")
    assert ran >= 5, ran


@pytest.mark.parametrize("second", ["click", "wait"])
def test_a_model_alternating_on_an_unchanged_screen_is_stuck_at_the_limits_round(bench: Bench, second: str) -> None:
    """Two dead spots clicked in turn, or a dead spot clicked and a wait: both on the label, where nothing
    happens and nothing moves."""
    x, y = bench.app.centre("still")
    first = click((x - 60, y))
    other = click((x + 60, y)) if second == "click" else {"actions": [{"type": "wait"}]}
    task, events = bench.run([first, other] * 8, repeat_limit=3, on_stuck="fail")
    assert task["state"] == "stuck", task["error"]
    (stuck,) = stuck_events(events)
    assert (stuck["rule"], stuck["period"], stuck["times"]) == ("repeat", 2, 3), stuck
    assert stuck["actions"] == [first["actions"][0], other["actions"][0]]
    assert "the same 2 actions" in stuck["message"] and "3 times in a row" in stuck["message"]
    # Three rounds of two: the sixth action is the one stopped.
    assert actions_run(events, "click") + actions_run(events, "wait") == 5


def test_a_model_typing_one_character_a_step_into_a_full_entry_is_not_stuck(bench: Bench) -> None:
    """100 characters, one a step: the entry fills after about 55 and then scrolls with each one, the
    screen the same pixel for pixel; the entry's text on the accessibility bus is what shows progress."""
    task, events = bench.run([click(bench.app.centre("entry"))] + [{"actions": [{"type": "type", "text": "x"}]}] * 100,
                             on_stuck="fail", max_steps=150)
    assert task["state"] == "succeeded", (task["error"], stuck_events(events))
    assert not stuck_events(events)
    assert bench.app.value() == "x" * 100
    # The case at hand: past the guard's limits, steps whose screens were the same pixel for pixel.
    shots = sorted((bench.daemon.state_dir / "trajectories" / str(task["id"])).glob("step-*.png"))
    pixels = [np.asarray(Image.open(shot).convert("RGB")) for shot in shots[-30:]]
    assert len(shots) > 100 and all(np.array_equal(p, pixels[0]) for p in pixels), "the entry did not fill"


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_on_stuck_ask_brings_it_to_a_person(bench: Bench, decision: str) -> None:
    still = bench.app.centre("still")
    task_id = bench.submit([click(still)] * 3, repeat_limit=3, on_stuck="ask")
    approval = bench.daemon.wait_approval(task_id)
    assert approval["kind"] == "stuck"
    (check,) = approval["checks"]
    assert check["code"] == "stuck" and check["message"].endswith(
        "on an unchanged screen 3 times in a row; let it continue?"), check
    assert approval["actions"] == [{"type": "click", "button": "left", "x": still[0], "y": still[1]}]
    if decision == "approve":
        bench.daemon.call("approve", id=approval["id"])
    else:
        bench.daemon.call("deny", id=approval["id"], reason="it is going nowhere")
    task = bench.daemon.wait_state(task_id, *FINAL, timeout=60)
    events = bench.daemon.events(task_id)
    if decision == "approve":
        assert task["state"] == "succeeded", task["error"]
        assert actions_run(events, "click") == 3  # the approved third click ran, and the model finished
    else:
        assert task["state"] == "stuck", task
        assert "denied" in task["error"]["message"] and "it is going nowhere" in task["error"]["message"]
        assert actions_run(events, "click") == 2
    assert len(stuck_events(events)) == 1


# -- no false alarms on legitimate work ------------------------------------------------------
#: Seconds the scripted model thinks before a click that closes a menu (real models take longer).
THINK = 0.6
WORDS = ["amber", "cedar", "ember", "fjord", "onyx", "quartz"]
MENU_TITLES = ["File", "Edit", "View", "Help"]
#: Characters that overfill the entry (400 pixels wide: about 55 x's).
FULL = 80


@st.composite
def segments(draw: st.DrawFn) -> tuple[str, Any]:
    """One piece of legitimate work, as (kind, its parameters): the steps are made with the app's regions."""
    kind = draw(st.sampled_from(["type", "fill", "scroll", "menus", "page"]))
    if kind == "type":
        return kind, draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    if kind == "fill":  # what to type, one character a step, and how many steps
        return kind, (draw(st.sampled_from(["x", "ab", "abc", "abcd"])), draw(st.integers(6, 16)))
    if kind == "scroll":
        return kind, (draw(st.integers(1, 6)), draw(st.sampled_from([100, 200, 300])))
    if kind == "menus":
        first = draw(st.sampled_from(MENU_TITLES))
        titles = [first]
        for _ in range(draw(st.integers(0, 3))):  # a tour: never the menu just closed again
            titles.append(draw(st.sampled_from([t for t in MENU_TITLES if t != titles[-1]])))
        return kind, [(t, draw(st.sampled_from(["escape", "click"]))) for t in titles]
    return kind, draw(st.integers(1, 6))


def _steps(app: BusyApp, work: list[tuple[str, Any]], waits: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    if waits:  # a download, waited for while it moves: one a task (see docs/stuck.md on a replayed screen)
        steps += [click(app.centre("download"))] + [{"actions": [{"type": "wait"}]}] * waits
    for kind, params in work:
        if kind == "type":
            steps += [click(app.centre("entry"))] + [{"actions": [{"type": "type", "text": w}]} for w in params]
        elif kind == "fill":
            # The entry filled at once, then one character a step: it scrolls, and the same characters in
            # turn show the same pixels again (every step for one character, every other for two...).
            chars, count = params
            steps += [click(app.centre("entry")), {"actions": [{"type": "type", "text": chars * (FULL // len(chars))}]}]
            steps += [{"actions": [{"type": "type", "text": chars[i % len(chars)]}]} for i in range(count)]
        elif kind == "scroll":
            count, pixels = params
            x, y = app.centre("list")
            steps += [{"actions": [{"type": "scroll", "x": x, "y": y, "scroll_x": 0, "scroll_y": pixels}]}] * count
        elif kind == "menus":
            for title, closing in params:
                steps.append(click(app.centre(f"menu:{title}")))
                # Closed by Escape, or by a click beside it as a person (or a model) thinks first: GTK ignores
                # a click that comes within a moment of a menu's opening, and a second click on its title.
                steps.append(key("ESC") if closing == "escape" else {**click(app.centre("still")), "delay": THINK})
        else:
            steps += [click(app.centre("doc"))] + [key("PAGEDOWN")] * params
    return steps


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[dict[str, int]]:
    counts = {"runs": 0, "actions": 0, "false_alarms": 0}
    yield counts
    line = (f"stuck guard, legitimate work: {counts['false_alarms']} false alarms in {counts['runs']} runs "
            f"({counts['actions']} actions)")
    # Past pytest's capture: the figure is for whoever runs the suite, passing or not.
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        print(f"\n{line}")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(work=st.lists(segments(), min_size=1, max_size=4), waits=st.integers(0, 6))
@example(work=[("scroll", (6, 100)), ("page", 6)], waits=6)
@example(work=[("menus", [("File", "click"), ("Edit", "escape"), ("File", "escape"), ("Edit", "click")])], waits=0)
@example(work=[("type", ["amber", "amber", "amber"]), ("type", ["amber", "amber", "amber"])], waits=0)
# Typing into a full entry, one character a step: before the guard read the entry's text, the same screen
# again and again, the same action (or the same few) on it, and the task was stopped as stuck.
@example(work=[("fill", ("x", 16))], waits=0)
@example(work=[("fill", ("abc", 16)), ("fill", ("ab", 12))], waits=0)
# Found: a menu "closed" by a second click on its title stays open in GTK and takes the scrolls that follow,
# which then change nothing: a model stuck indeed. The script now closes menus as a person would.
@example(work=[("menus", [("File", "click")]), ("scroll", (5, 100))], waits=0)
def test_legitimate_work_never_trips_the_guard(bench: Bench, tally: dict[str, int],
                                               work: list[tuple[str, Any]], waits: int) -> None:
    steps = _steps(bench.app, work, waits)
    # The shipped limits ([guard]'s defaults); a false alarm ends the task at once instead of waiting for a person.
    task, events = bench.run(steps, on_stuck="fail")
    tally["runs"] += 1
    tally["actions"] += len(steps)
    if task["state"] == "stuck":
        tally["false_alarms"] += 1
    assert task["state"] == "succeeded", (task["error"], stuck_events(events), work, waits)
    assert not stuck_events(events)
