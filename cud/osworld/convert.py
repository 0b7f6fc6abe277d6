"""OSWorld's task files as cud task specs (docs/osworld.md): the public entry points and the task's top level.

An OSWorld task (``evaluation_examples/examples/*/*.json``) has an ``instruction``, a
``config`` list of setup steps (``{"type", "parameters"}``) and an ``evaluator`` (result
getters, expected values, metrics, a ``postconfig``). :func:`convert_osworld` maps what cud can
do as OSWorld's code does it onto a spec mapping that :func:`cud.spec.parse_spec` accepts, and
refuses anything else with a SpecError that names the type and where it is; :func:`osworld_blockers`
finds every refusal of a task, not only the first. ``download`` URLs and ``cloud_file`` files are
fetched here, on the submitter's side, never by the seat. The steps are :mod:`cud.osworld.steps`,
the checks :mod:`cud.osworld.evaluator`.

Ported from OSWorld's desktop_env (Apache-2.0); each module names the functions it follows.

Paths: OSWorld's tasks run in an Ubuntu VM as the user ``user``, so they name files by absolute
paths under ``/home/user``. The seat's home takes its place: path parameters become paths in the
home, and commands that name ``/home/user`` run with it replaced by the seat's home
(:data:`cud.osworld.steps.HOME_REWRITE`). For seats whose session sees its home at ``/home/user``
(``[[seats]] home_path``, docs/sessions.md), ``as_written``: commands run as the task wrote them.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cud.errors import SpecError
from cud.osworld.context import OSWORLD_HOME, SCREEN, Context, Fetch, placeholders
from cud.osworld.evaluator import evaluator
from cud.osworld.steps import config_step
from cud.protocol import SeatView
from cud.seat_needs import is_screen, is_tag
from cud.spec import values as v
from cud.spec.schema import Spec, parse_spec
from cud.spec.wire import MAX_SPEC_FILE_BYTES

__all__ = ("OSWORLD_HOME", "SCREEN", "OsworldSpec", "convert_osworld", "fetch_url", "load_osworld",
           "osworld_blockers", "seats_screen", "sees_home_user")

#: Seconds the default fetcher gives one download in all.
FETCH_SECONDS = 60.0
#: Top-level keys OSWorld's runner does not act on (a task's notes, or another agent's ``hint``), ignored.
_INFORMATIONAL = frozenset({"snapshot", "source", "trajectory", "related_apps", "proxy", "fixed_ip",
                            "possibility_of_env_change", "env_may_change", "hint"})
_TASK_KEYS = frozenset({"id", "instruction", "config", "evaluator"}) | _INFORMATIONAL
#: The tip OSWorld's runner for OpenAI's computer-use model adds to every instruction for infeasible tasks
#: (mm_agents/openai_cua_agent.py: OPERATOR_PROMPT), so the model knows how to declare one (the ``answer``
#: check of an ``infeasible`` task looks for INFEASIBLE_WORDS).
INFEASIBLE_TIP = ('If you deem the task is infeasible, you can terminate and explicitly state in the response that '
                  '"the task is infeasible".')


class OsworldSpec(dict[str, Any]):
    """A converted task: the spec mapping itself (``parse_spec`` accepts it, as a spec file's TOML), and in
    :attr:`files` the bytes of every file it names on the submitter's side, by the name it gives them
    (a download's or a ``cloud_file``'s URL): what :func:`cud.spec.load.load_spec` returns beside a spec."""

    files: dict[str, bytes]


def sees_home_user(seats: Sequence[SeatView] | None, chosen: Sequence[str] | None) -> bool:
    """Whether every seat of ``seats`` that tasks may go to (``chosen``, or all) sees its home at /home/user
    (``home_path``): then converted tasks run their commands ``as_written``. None (a fleet's seats, unknown here): no."""
    used = [s for s in seats or [] if not chosen or s["name"] in chosen]
    return bool(used) and all(s.get("home_path") == OSWORLD_HOME for s in used)


def seats_screen(seats: Sequence[SeatView] | None, chosen: Sequence[str] | None,
                 given: str | None = None) -> tuple[int, int]:
    """The screen converted tasks fill OSWorld's placeholders from and ask their seat for: ``given`` (``--screen``),
    else the one size every seat of ``seats`` that tasks may go to (``chosen``, or all) has, else OSWorld's VM's
    (SCREEN). OSWorld fills them from its VM's own screen (desktop_env.py hands its screen size to SetupController)."""
    if given is not None and is_screen(given):
        width, _, height = given.partition("x")
        return int(width), int(height)
    used = [s.get("size") for s in seats or [] if not chosen or s["name"] in chosen]
    sizes = {(size[0], size[1]) for size in used if size}
    if used and len(sizes) == 1 and all(used):
        return sizes.pop()
    return SCREEN


def convert_osworld(task: Mapping[str, Any], *, source: str, fetch: Fetch, as_written: bool = False,
                    screen: tuple[int, int] = SCREEN) -> OsworldSpec:
    """``task`` (an OSWorld task's JSON, read from ``source``) as a spec mapping; SpecError names what has no counterpart.
    ``as_written``: for seats that see their home at /home/user, commands are not rewritten (the module's text).
    ``screen``: the seat's screen (the spec's ``screen``), which fills OSWorld's ``{SCREEN_WIDTH}``-like placeholders."""
    return _task(Context(source, fetch, as_written=as_written, screen=screen), task)


def osworld_blockers(task: Mapping[str, Any], *, source: str, fetch: Fetch, as_written: bool = False,
                     screen: tuple[int, int] = SCREEN) -> list[SpecError]:
    """Every refusal converting ``task`` meets (each config entry, postconfig entry and metric is tried), in the
    order :func:`convert_osworld` reads them; empty when it converts."""
    ctx = Context(source, fetch, as_written=as_written, screen=screen, collect=True)
    ctx.attempt(_task, ctx, task)
    return ctx.blockers


def load_osworld(path: Path, *, fetch: Fetch | None = None, as_written: bool = False,
                 screen: tuple[int, int] = SCREEN) -> tuple[Spec, dict[str, bytes]]:
    """The OSWorld task in ``path`` as a parsed Spec and its files, as :func:`cud.spec.load.load_spec` returns them."""
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise SpecError(f"cannot read OSWorld task file {str(path)!r}: {exc.strerror}", key="",
                        value=str(path)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"OSWorld task file {str(path)!r} is not JSON: {exc}", key="", value=str(path)) from None
    converted = convert_osworld(raw, source=str(path), fetch=fetch or fetch_url, as_written=as_written, screen=screen)
    return parse_spec(dict(converted)), converted.files


class _NoOtherSchemes(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            fp.close()
            raise urllib.error.URLError(f"redirected to {newurl!r}, which is not http or https")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def fetch_url(url: str, *, limit: int = MAX_SPEC_FILE_BYTES, seconds: float = FETCH_SECONDS) -> bytes:
    """GET ``url`` (http or https only, redirects too) within ``limit`` bytes and ``seconds``; SpecError says why not."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise SpecError(f"cannot fetch {url!r}: only http and https URLs are fetched", key="url", value=url)
    deadline = time.monotonic() + seconds
    opener = urllib.request.build_opener(_NoOtherSchemes)
    chunks: list[bytes] = []
    size = 0
    try:
        with opener.open(urllib.request.Request(url, headers={"User-Agent": "cuctl"}), timeout=seconds) as response:
            while chunk := response.read(64 * 1024):
                size += len(chunk)
                if size > limit:
                    raise SpecError(f"{url!r} is larger than the {limit} bytes a spec's file may have "
                                    f"(MAX_SPEC_FILE_BYTES)", key="url", value=url, limit=limit)
                if time.monotonic() > deadline:
                    raise SpecError(f"fetching {url!r} took more than {seconds:g} s", key="url", value=url)
                chunks.append(chunk)
    except (OSError, ValueError) as exc:  # URLError, HTTPError and socket timeouts are OSErrors
        if isinstance(exc, urllib.error.HTTPError):
            exc.close()  # it holds the response's socket
        raise SpecError(f"cannot fetch {url!r}: {getattr(exc, 'reason', None) or exc}", key="url",
                        value=url) from None
    return b"".join(chunks)




def _task(ctx: Context, task: Mapping[str, Any]) -> OsworldSpec:
    raw = ctx.table("task", task, _TASK_KEYS, "OSWorld task")
    instruction = raw.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise ctx.refuse("instruction", instruction, f"the task's 'instruction' must be a non-blank string, got "
                                                     f"{v.shown(instruction)}")
    configs = raw.get("config", [])
    if not isinstance(configs, list):
        raise ctx.refuse("config", configs, f"the task's 'config' must be a list, got {v.shown(configs)}")
    setup = [s for i, c in enumerate(configs) for s in ctx.attempt(config_step, ctx, f"config[{i}]", c) or []]
    judging = evaluator(ctx, raw.get("evaluator"))
    width, height = ctx.screen
    spec = OsworldSpec(prompt=f"{instruction}\n\n{INFEASIBLE_TIP}", tags=["osworld"], screen=f"{width}x{height}",
                       reset=True, setup=setup, **judging)
    if is_tag(raw.get("id")):
        spec["tags"].append(raw["id"])
    spec.files = ctx.files
    if ctx.blockers:  # collecting: the spec of a task with refused parts is never checked, nor returned
        return spec
    for left in placeholders(dict(spec)):
        raise ctx.refuse(left.split(": ")[0], left, f"the converted task keeps OSWorld's placeholder ({left}): only "
                                                    f"commands have theirs filled")
    try:
        parse_spec(dict(spec))  # what the converter made must be a spec: refused here, not on the seat
    except SpecError as exc:
        raise ctx.refuse(exc.details.get("key", ""), exc.details.get("value"),
                         f"the converted task is not a valid spec: {exc.message}") from None
    return spec
