"""The stuck guard's rules on their own (daemon/tasks/stuck.py, docs/stuck.md): screens as fingerprints
made here, actions as the model's, what the focused element holds as the hash the daemon reads.

The real screens, model and accessibility bus are in tests/test_stuck.py; here each rule's counting is
checked exactly, over many rounds and sequences: a round of 1 to 4 actions chosen again and again on an
unchanged screen trips the repeat rule at the last action of its ``repeat_limit``-th round, never
before; an unchanged screen whose focused element holds something new at each step (an entry that is
full and scrolls as it fills) never trips it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.daemon.tasks.stuck import MAX_PERIOD, Stuck, StuckGuard

TILES = 1000
STILL = np.arange(TILES, dtype=np.uint64)  # one screen that never changes


def screen(seed: int) -> np.ndarray:
    """A screen all of whose tiles differ from every other seed's (a new page)."""
    return np.random.default_rng(seed).integers(1, 2**63, TILES, dtype=np.uint64)


def click(x: int, y: int = 100) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": x, "y": y}


WAIT = {"type": "wait"}


def play(guard: StuckGuard, steps: list[tuple[np.ndarray, int | None, list[dict[str, Any]]]]) -> tuple[int, Stuck] | None:
    """Each step: the screenshot (and what the focused element held), then the batch chosen on it.
    The first trip: the step's number (1-based) and what tripped."""
    for number, (shown, held, batch) in enumerate(steps, 1):
        guard.see(shown, held)
        for action in batch:
            stuck = guard.act(action)
            if stuck is not None:
                return number, stuck
    return None


def still(actions: list[dict[str, Any]], held: int | None = None) -> list[tuple[np.ndarray, int | None, list[dict[str, Any]]]]:
    return [(STILL, held, [a]) for a in actions]


# -- a round of actions on an unchanged screen ----------------------------------------------------
def test_alternating_two_clicks_on_an_unchanged_screen_is_stuck_at_the_limits_round() -> None:
    found = play(StuckGuard(5, 4), still([click(100), click(300)] * 30))
    assert found is not None
    number, stuck = found
    assert number == 10  # the second click of the fifth round: it is the one stopped
    assert (stuck.rule, stuck.period, stuck.times) == ("repeat", 2, 5)
    assert stuck.actions == (click(100), click(300)) and stuck.action == click(300)
    assert stuck.message == ("the model chose the same 2 actions (click left at (100, 100), then click left at "
                             "(300, 100)) on an unchanged screen 5 times in a row")
    assert stuck.as_event()["actions"] == [click(100), click(300)]


def test_a_click_and_a_wait_in_turn_on_an_unchanged_screen_is_stuck() -> None:
    found = play(StuckGuard(3, 4), still([click(100), WAIT] * 30))
    assert found is not None and found[0] == 6
    assert (found[1].rule, found[1].period, found[1].times) == ("repeat", 2, 3)


def test_three_actions_in_turn_on_an_unchanged_screen_are_stuck() -> None:
    keys = {"type": "keypress", "keys": ["TAB"]}
    found = play(StuckGuard(4, 4), still([click(100), keys, click(500, 400)] * 30))
    assert found is not None and found[0] == 12
    assert (found[1].rule, found[1].period, found[1].times) == ("repeat", 3, 4)


def test_one_action_repeated_is_still_a_round_of_one() -> None:
    found = play(StuckGuard(5, 4), still([click(100), click(102)] * 10))  # within POINT_TOLERANCE: one point
    assert found is not None and found[0] == 5
    assert (found[1].rule, found[1].period) == ("repeat", 1)
    assert found[1].message == "the model chose click left at (100, 100) on an unchanged screen 5 times in a row"


@st.composite
def rounds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1 to MAX_PERIOD actions, all different (so the round is no shorter round repeated)."""
    pool = [click(100 * i) for i in range(1, 9)] + [WAIT, {"type": "keypress", "keys": ["ESC"]},
                                                      {"type": "type", "text": "x"},
                                                      {"type": "scroll", "x": 50, "y": 50, "scroll_x": 0,
                                                       "scroll_y": 100}]
    return draw(st.lists(st.sampled_from(pool), min_size=1, max_size=MAX_PERIOD, unique_by=repr))


@settings(max_examples=200, deadline=None)
@given(round_=rounds(), limit=st.integers(2, 8), lead=st.integers(0, 5), held=st.sampled_from([None, 7]))
def test_any_round_on_an_unchanged_screen_trips_at_its_limits_round(round_: list[dict[str, Any]], limit: int,
                                                                   lead: int, held: int | None) -> None:
    # Some different work first (each on a new screen), then the round again and again.
    work = [(screen(i), None, [click(10 + 20 * i, 700)]) for i in range(lead)]
    found = play(StuckGuard(limit, 20), work + still(round_ * (limit + 3), held))
    assert found is not None
    number, stuck = found
    assert number == lead + len(round_) * limit
    assert (stuck.rule, stuck.period, stuck.times) == ("repeat", len(round_), limit)
    assert list(stuck.actions) == round_


# -- an unchanged screen where the focused element changes ------------------------------------------
@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet="ax.", min_size=1, max_size=3), limit=st.integers(2, 8))
def test_typing_into_a_full_scrolling_entry_is_progress(text: str, limit: int) -> None:
    """One character a step into an entry that is full: the pixels stay the same, its text grows."""
    steps = [(STILL, hash("x" * 80 + (text * 100)[:i]), [{"type": "type", "text": text[i % len(text)]}])
             for i in range(100)]
    assert play(StuckGuard(limit, 4), steps) is None
    # What the pixels alone would say: stuck (the accessibility tree not there, nothing focused).
    blind = [(shown, None, batch) for shown, _held, batch in steps]
    assert play(StuckGuard(limit, 4), blind) is not None


def test_typing_and_deleting_in_a_full_entry_is_stuck() -> None:
    """The text comes back every other step: no progress, whatever the pixels."""
    steps = [(STILL, hash("full" if i % 2 else "full!"), [{"type": "keypress", "keys": ["BACKSPACE"]}
                                                          if i % 2 == 0 else {"type": "type", "text": "!"}])
             for i in range(40)]
    found = play(StuckGuard(5, 4), steps)
    assert found is not None and found[0] == 8 and found[1].rule == "cycle", found
    # And the repeat rule on its own: the text came back, so the screen is the same one (from the second
    # step on: the first time, the text was new).
    found = play(StuckGuard(5, 0), steps)
    assert found is not None and found[0] == 11 and (found[1].rule, found[1].period) == ("repeat", 2), found


def test_focus_moving_between_two_fields_is_no_progress() -> None:
    """Clicking two fields in turn: what is focused comes back every other step (the cycle rule's, as it
    would be were the two fields' carets and focus rings not alike: the screens are two)."""
    steps = [(STILL, hash(("field", i % 2)), [click(100 + 200 * (i % 2))]) for i in range(40)]
    found = play(StuckGuard(5, 4), steps)
    assert found is not None and found[0] == 8
    assert (found[1].rule, found[1].period, found[1].times) == ("cycle", 2, 4)
    found = play(StuckGuard(5, 0), steps)  # the first change of focus is one; the rest come back
    assert found is not None and found[0] == 11 and (found[1].rule, found[1].period) == ("repeat", 2), found


# -- batches -------------------------------------------------------------------------------
def test_a_batch_is_one_choice_compared_whole() -> None:
    same = [(STILL, None, [click(100), click(300)]) for _ in range(10)]
    found = play(StuckGuard(5, 4), same)
    assert found is not None and found[0] == 5
    # The same first action, the rest different each time: the model is trying things.
    varied = [(STILL, None, [click(100), {"type": "type", "text": str(i)}]) for i in range(30)]
    assert play(StuckGuard(5, 4), varied) is None


# -- no false alarms on work that changes the screen ----------------------------------------------
@settings(max_examples=200, deadline=None)
@given(actions=st.lists(st.sampled_from([click(100), click(300), WAIT, {"type": "keypress", "keys": ["PAGEDOWN"]}]),
                        min_size=1, max_size=80),
       held=st.sampled_from([None, 1]))
def test_any_actions_on_a_screen_that_keeps_changing_never_trip(actions: list[dict[str, Any]],
                                                                held: int | None) -> None:
    """A page that scrolls, a download that moves: each screen shows what no screen before did."""
    assert play(StuckGuard(2, 2), [(screen(i), held, [a]) for i, a in enumerate(actions)]) is None


def test_the_cycle_rule_still_needs_different_screens_and_counts_rounds() -> None:
    closed, opened = screen(1), screen(2)
    steps = [(closed if i % 2 == 0 else opened, None, [click(100) if i % 2 == 0 else {"type": "keypress", "keys": ["ESC"]}])
             for i in range(20)]
    found = play(StuckGuard(5, 3), steps)
    assert found is not None and found[0] == 6
    assert (found[1].rule, found[1].period, found[1].times) == ("cycle", 2, 3)


def test_counting_starts_again_after_a_trip() -> None:
    """A person let it go on: the next ``repeat_limit`` rounds are counted afresh."""
    guard = StuckGuard(3, 4)
    for _ in range(3):
        found = play(guard, still([click(100), WAIT] * 3))
        assert found is not None and found[0] == 6
