"""An OSWorld GIMP task end to end: ``cuctl eval --from-osworld`` on a seat whose home template is
cud.osworld.seat's, with a scripted model that works through GIMP 2.10's menus by their keyboard mnemonics.

The task is shaped like OSWorld's gimp/72f83cdc… ("mirror my figure horizontally"): its config downloads a
picture to the Desktop and launches ``gimp`` on it; ``check_image_mirror`` judges the file the model wrote
against the same picture fetched again as a ``cloud_file``. OSWorld's own task exports with a pyautogui
postconfig (Shift+Ctrl+E, a name, Enter, Enter); here the model writes the picture itself, with File >
Overwrite (Alt+F, W), which in Debian's GIMP 2.10 writes an imported PNG over its file with no dialog (Ctrl+E
would open the Export dialog, since nothing was exported yet). The postconfig waits (bounded) until the file is
newer than a mark the config leaves after the download.

The model waits, screenshot by screenshot, until the picture's red band shows (GIMP has started and shown the
image), then presses Alt+I, T (Image > Transform) and H (Flip Horizontally) — ``mirror`` — or V (Flip
Vertically) — ``upside-down`` — and overwrites. The picture is asymmetric both ways, so only the horizontal
flip passes. One daemon, one seat and one server for the module.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cud.daemon.session.user import SeatUser
from tests.support.http_files import Served, serve_files
from tests.support.osworld_e2e import osworld_seat, outcomes, run, task, write_index
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat

TASK = ("gimp", "mirror-berry")
PICTURE = "/home/user/Desktop/berry.png"
MARK = "/home/user/.downloaded-mark"
#: The picture's colours: a band on the left, a stripe along the top, the rest. RED is on no other pixel of
#: GIMP's window, so the model waits for it to know the image is shown.
RED, YELLOW, BLUE = "#DC2828", "#F0D214", "#1E78C8"
#: GIMP's first start (its user installation, fonts) takes ~25 s on an idle 2-core machine; a look is a second
#: or more, and the daemon's max_steps below leave room for this many.
LOOKS = 90


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def picture() -> bytes:
    """320x200: RED for x < 120, a YELLOW stripe for y < 40 right of it, BLUE elsewhere; no colour profile
    (one would make GIMP ask whether to convert it to its working space)."""
    image = Image.new("RGB", (320, 200), rgb(BLUE))
    image.paste(rgb(YELLOW), (120, 0, 320, 40))
    image.paste(rgb(RED), (0, 0, 120, 200))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def flipping(key: str, final: str) -> dict[str, Any]:
    """Once RED shows: Image (Alt+I) > Transform (T) > ``key``, then File (Alt+F) > Overwrite (W); ``final``."""
    return {"steps": [
        {"actions": [{"type": "screenshot"}]},
        {"until": {"color": RED, "looks": LOOKS}, "actions": [{"type": "keypress", "keys": ["alt", "i"]}]},
        *({"actions": [{"type": "keypress", "keys": keys}]} for keys in (["t"], [key], ["alt", "f"], ["w"])),
        {"message": final}]}


SCENARIOS = {
    "mirror": {"name": "mirror", **flipping("h", "The picture is mirrored horizontally.")},
    "upside-down": {"name": "upside-down", **flipping("v", "Done: the picture is mirrored.")},
}


def gimp_task(base: str) -> dict[str, Any]:
    picture_url = f"{base}/cache/{'/'.join(TASK)}/berry.png"
    # The model writes the picture itself; this waits (at most 30 s) for GIMP to have done so.
    written = {"type": "execute", "parameters": {"command": [
        "/bin/sh", "-c", f"for i in $(seq 60); do [ {PICTURE} -nt {MARK} ] && break; sleep 0.5; done"]}}
    return task(
        "gimp", "Please rotate my figure to mirror it horizontally, and keep it in the same file.",
        [{"type": "download", "parameters": {"files": [{"url": picture_url, "path": PICTURE}]}},
         {"type": "execute", "parameters": {"command": ["touch", MARK]}},
         {"type": "launch", "parameters": {"command": ["gimp", PICTURE]}}],
        {"postconfig": [written], "func": "check_image_mirror",
         "expected": {"type": "cloud_file", "path": picture_url, "dest": "berry_original.png"},
         "result": {"type": "vm_file", "path": PICTURE, "dest": "berry.png"}})


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serve_files({f"/cache/{'/'.join(TASK)}/berry.png": picture()}) as s:
        yield s


@pytest.fixture(scope="module")
def judge(seat_users: SeatUsers) -> SeatUser:
    return seat_users.make()


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers, judge: SeatUser) -> Iterator[SpecSeat]:
    # A run is 7 turns once GIMP shows, besides the looks while it starts.
    with osworld_seat(seat_users, judge, SCENARIOS, "mirror", config=f"max_steps = {LOOKS + 20}\n") as s:
        yield s


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, served: Served) -> Path:
    examples = tmp_path_factory.mktemp("osworld") / "evaluation_examples"
    return write_index(examples, {TASK[0]: {TASK[1]: gimp_task(served.base)}}, "gimp")


def test_the_picture_flipped_horizontally_and_overwritten_passes_osworlds_mirror_check(
        seat: SpecSeat, index: Path, served: Served, tmp_path: Path) -> None:
    runs = run(seat, index, tmp_path / "out", "scripted:mirror")
    assert outcomes(runs) == {"/".join(TASK): ("succeeded", "passed")}, json.dumps(runs, indent=1)[:6000]
    assert [c["name"] for c in runs["/".join(TASK)]["checks"]] == ["check_image_mirror on vm_file"]
    # cuctl fetches the URL once, for the download and the gold alike.
    assert f"/cache/{'/'.join(TASK)}/berry.png" in served.requested


def test_the_picture_flipped_vertically_fails_osworlds_mirror_check_with_its_reason(
        seat: SpecSeat, index: Path, tmp_path: Path) -> None:
    runs = run(seat, index, tmp_path / "out", "scripted:upside-down")
    assert outcomes(runs) == {"/".join(TASK): ("succeeded", "failed")}, json.dumps(runs, indent=1)[:6000]
    [check] = runs["/".join(TASK)]["checks"]
    assert check["why"].startswith("OSWorld's check_image_mirror scored 0"), json.dumps(check, indent=1)
