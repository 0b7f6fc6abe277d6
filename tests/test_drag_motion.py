"""The drag schedule both drivers follow (``drivers/drag_motion.py``), on random paths, without a display."""

from __future__ import annotations

import itertools
import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.drivers import drag_motion as M
from cud.drivers.actions import BUTTON_HOLD_SECONDS, MAX_PATH_POINTS

Point = tuple[int, int]
#: How much longer a step between pixels can be than on the line: each end is rounded by up to half a pixel in x
#: and in y.
ROUNDING = math.sqrt(2)


@st.composite
def screens_and_paths(draw: st.DrawFn) -> tuple[tuple[int, int], tuple[Point, ...]]:
    width = draw(st.integers(2, 3840))
    height = draw(st.integers(2, 2160))
    point = st.tuples(st.integers(0, width - 1), st.integers(0, height - 1))
    # Repeated and nearby points too: a model may send the same point twice.
    path = draw(st.lists(point, min_size=2, max_size=6))
    return (width, height), tuple(path)


@st.composite
def long_paths(draw: st.DrawFn) -> tuple[tuple[int, int], tuple[Point, ...]]:
    """Paths of any length up to the driver's limit (half of them over 128 points, where the ticks are capped):
    the length, then five bytes a point in one draw. A list of that many drawn points costs Hypothesis ~0.1 s
    an example, so only 15 were tried, and its lists of up to 1024 came out 16 points long at most."""
    width = draw(st.integers(2, 3840))
    height = draw(st.integers(2, 2160))
    count = draw(st.integers(2, MAX_PATH_POINTS))
    raw = draw(st.binary(min_size=5 * count, max_size=5 * count))
    path: list[Point] = []
    for index in range(0, len(raw), 5):
        kind, a, b, c, d = raw[index:index + 5]
        if path and kind % 4 == 0:  # the same point again
            point = path[-1]
        elif path and kind % 4 == 1:  # a few pixels on
            x, y = path[-1]
            point = (min(width - 1, max(0, x + a % 17 - 8)), min(height - 1, max(0, y + b % 17 - 8)))
        else:  # anywhere on the screen
            point = ((a << 8 | b) % width, (c << 8 | d) % height)
        path.append(point)
    return (width, height), tuple(path)


def _distance_to_segment(p: Point, a: Point, b: Point) -> float:
    if a == b:
        return math.dist(p, a)
    (ax, ay), (bx, by) = a, b
    t = ((p[0] - ax) * (bx - ax) + (p[1] - ay) * (by - ay)) / ((bx - ax) ** 2 + (by - ay) ** 2)
    t = min(1.0, max(0.0, t))
    return math.dist(p, (ax + t * (bx - ax), ay + t * (by - ay)))


def _route(motion: M.DragMotion) -> list[Point]:
    """The motion's points without the closing 1-pixel steps off the end and back."""
    points = list(motion.points)
    hover = 2 * M.HOVER_STEPS
    closing = len(motion.ticks) >= hover and motion.ticks[-hover].pause == M.HOVER_SECONDS
    return points[:-hover] if closing else points


def _visited(path: tuple[Point, ...], points: tuple[Point, ...]) -> bool:
    """Every point of ``path`` is among ``points``, in order (a repeat of the one before needs no motion)."""
    remaining = iter(points)
    return all(p in remaining for i, p in enumerate(path[1:]) if p != path[i])


@settings(max_examples=400, deadline=None)
@given(screens_and_paths())
def test_every_model_point_is_visited_in_order_along_its_segments(case: tuple[tuple[int, int], tuple[Point, ...]]) -> None:
    screen, path = case
    motion = M.drag_motion(path, screen)
    route = _route(motion)
    # Walk the route: each model point is reached, in order, and each step on the way lies
    # on the segment towards it (within the half pixel of rounding to integers).
    here, index = path[0], 0
    for target in path[1:]:
        if target == here:
            continue
        while True:
            assert index < len(route), f"{target} never reached in {route} for {path}"
            step = route[index]
            index += 1
            assert _distance_to_segment(step, here, target) <= math.sqrt(0.5) + 1e-9, (step, here, target, path)
            if step == target:
                break
        here = target
    assert index == len(route), f"motion past the end of {path}: {route[index:]}"
    width, height = screen
    assert all(0 <= x < width and 0 <= y < height for x, y in motion.points)
    if route:
        assert motion.points[-1] == path[-1]


@settings(max_examples=300, deadline=None)
@given(screens_and_paths())
def test_small_steps_past_the_threshold_then_a_pause(case: tuple[tuple[int, int], tuple[Point, ...]]) -> None:
    screen, path = case
    motion = M.drag_motion(path, screen)
    if not motion.ticks:
        return
    assert motion.ticks[0].pause == BUTTON_HOLD_SECONDS  # the press is held first, as a click's
    previous = path[0]
    for tick in motion.ticks:
        if tick.pause == M.DRAG_START_SECONDS:
            # The pause comes once the pointer is past the threshold, never before.
            assert math.dist(previous, path[0]) >= M.THRESHOLD_PIXELS
            break
        for point in tick.points:
            if math.dist(previous, path[0]) < M.THRESHOLD_PIXELS:
                assert math.dist(point, previous) <= M.THRESHOLD_STEP_PIXELS + ROUNDING, (point, previous, path)
            previous = point


@settings(max_examples=300, deadline=None)
@given(screens_and_paths())
@example(((412, 156), ((42, 1), (411, 155))))  # a 23.99 px step, 25.08 px between its rounded ends
def test_steps_are_small_and_the_end_is_dwelt_on(case: tuple[tuple[int, int], tuple[Point, ...]]) -> None:
    screen, path = case
    motion = M.drag_motion(path, screen)
    points = [path[0], *motion.points]
    if len(motion.ticks) < M.MAX_TICKS // 2:  # uncapped: one step per tick
        assert all(len(t.points) == 1 for t in motion.ticks)
        assert all(math.dist(a, b) <= M.STEP_PIXELS + ROUNDING for a, b in itertools.pairwise(points))
    assert motion.dwell == M.DWELL_SECONDS
    hover = motion.ticks[-2 * M.HOVER_STEPS:]
    if len(points) > 2 and math.dist(points[-2], points[-1]) == 1:
        # Off the end and back, paced, ending on the end.
        assert [t.pause for t in hover] == [M.HOVER_SECONDS, M.STEP_SECONDS] * M.HOVER_STEPS
        assert [t.points[0] for t in hover[1::2]] == [path[-1]] * M.HOVER_STEPS
        assert all(math.dist(t.points[0], path[-1]) == 1 for t in hover[::2])


@settings(max_examples=150, deadline=None)
@given(long_paths())
def test_a_long_path_takes_bounded_time_and_sends_every_point(case: tuple[tuple[int, int], tuple[Point, ...]]) -> None:
    screen, path = case
    motion = M.drag_motion(path, screen)
    assert len(motion.ticks) <= M.MAX_TICKS + 2 * M.HOVER_STEPS
    bound = (BUTTON_HOLD_SECONDS + M.DRAG_START_SECONDS + M.DWELL_SECONDS + M.MAX_TICKS * M.STEP_SECONDS
             + M.HOVER_STEPS * (M.HOVER_SECONDS + M.STEP_SECONDS))
    assert motion.seconds <= bound
    assert _visited(path, motion.points)


def test_a_two_point_drag_across_a_drop_zone_takes_well_under_a_second() -> None:
    motion = M.drag_motion(((930, 350), (1147, 411)), (1280, 800))
    assert motion.seconds < 0.8
    assert motion.points[-1] == (1147, 411)


def test_the_step_off_the_end_stays_on_the_screen() -> None:
    # At the screen's corner the way back is off the screen: the step goes the other way.
    motion = M.drag_motion(((0, 0), (0, 0), (5, 0), (0, 0)), (10, 10))
    *_, off, end = motion.points
    assert motion.points[-2 * M.HOVER_STEPS:] == (off, end) * M.HOVER_STEPS
    assert end == (0, 0) and off in ((1, 0), (0, 1))
    assert M.drag_motion(((0, 0), (0, 0)), (1, 1)).ticks == ()  # nowhere to go: press and release
