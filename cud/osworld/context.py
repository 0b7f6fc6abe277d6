"""What converting one OSWorld task keeps: its source, the fetcher, the seat's view of the home, the screen.

Shared by the config steps (:mod:`cud.osworld.steps`) and the checks (:mod:`cud.osworld.evaluator`):
refusals that name the task file and the key, a task's table checked against the keys OSWorld's
code reads, downloads made once per URL, the paths of OSWorld's VM user mapped onto the seat's
home, and the placeholders OSWorld's SetupController fills in commands.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from cud.errors import SpecError
from cud.spec import values as v

__all__ = ("OSWORLD_HOME", "Context", "Fetch")

T = TypeVar("T")

Fetch = Callable[[str], bytes]
#: The home of OSWorld's VM user, which the seat's home stands for.
OSWORLD_HOME = "/home/user"
#: OSWorld's VM's screen (desktop_env/controllers/setup.py: SetupController's screen_width, screen_height).
SCREEN = (1920, 1080)
#: The password placeholder: OSWorld's VM user has a sudo password, a cud seat's user none.
PASSWORD = "{CLIENT_PASSWORD}"
#: A placeholder, as written or escaped in a pattern made of it (``\\{SCREEN_WIDTH\\}``).
_PLACEHOLDER = re.compile(r"\\?\{(?:SCREEN_WIDTH|SCREEN_HEIGHT|SCREEN_WIDTH_HALF|SCREEN_HEIGHT_HALF|CLIENT_PASSWORD)"
                          r"\\?\}")


class Context:
    """One task's conversion: refusals name ``source`` and the key; downloads land in :attr:`files`.

    ``collect``: a refusal met by :meth:`attempt` is kept in :attr:`blockers` and the conversion goes
    on, so every blocker of a task is found (bench/osworld_coverage.py); else the first one is raised.
    """

    def __init__(self, source: str, fetch: Fetch, *, as_written: bool = False, screen: tuple[int, int] = SCREEN,
                 collect: bool = False) -> None:
        self.source = source
        self.fetch = fetch
        self.as_written = as_written
        self.screen = screen
        self.collect = collect
        self.blockers: list[SpecError] = []
        self.files: dict[str, bytes] = {}
        #: Steps a getter acts with before its file is read (cud.osworld.getter_steps): run after the postconfig.
        self.after: list[dict[str, Any]] = []

    def refuse(self, key: str, value: object, why: str) -> SpecError:
        return SpecError(f"{self.source}: {why}", key=key, value=v.shown(value))

    def attempt(self, make: Callable[..., T], *args: Any) -> T | None:
        """``make(*args)``; when collecting, a refusal is kept and None stands for the part refused."""
        try:
            return make(*args)
        except SpecError as exc:
            if not self.collect:
                raise
            self.blockers.append(exc)
            return None

    def table(self, key: str, value: object, allowed: frozenset[str], what: str) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self.refuse(key, value, f"{key} must be an object ({what}), got {v.shown(value)}")
        for name in value:
            if name not in allowed:
                raise self.refuse(f"{key}.{name}", name, f"{what} key {name!r} in {key} has no counterpart in cud "
                                                         f"(known: {', '.join(sorted(allowed))})")
        return dict(value)

    def kind(self, key: str, kind: object, supported: Mapping[str, object], refused: Mapping[str, str],
             what: str) -> str:
        """``kind`` (a config type or getter type at ``key``) when cud has its counterpart; the refusal says why
        when ``refused`` names it, and lists the ``supported`` ones when nothing does."""
        if isinstance(kind, str) and kind in refused:
            raise self.refuse(key, kind, f"OSWorld {what} {kind!r} in {key.rsplit('.', 1)[0]} has no counterpart "
                                         f"in cud: {refused[kind]}")
        if not isinstance(kind, str) or kind not in supported:
            raise self.refuse(key, kind, f"OSWorld {what} {kind!r} in {key.rsplit('.', 1)[0]} has no counterpart "
                                         f"in cud (supported: {', '.join(supported)})")
        return kind

    def flag(self, key: str, p: Mapping[str, Any], name: str) -> bool:
        value = p.get(name, False)
        if not isinstance(value, bool):
            raise self.refuse(f"{key}.{name}", value, f"{key}.{name} must be true or false, got {v.shown(value)}")
        return value

    def download(self, key: str, url: object) -> str:
        """``url`` fetched once (on the submitter's side); the name the spec gives its bytes (the URL itself)."""
        if not isinstance(url, str) or not url.strip():
            raise self.refuse(key, url, f"{key} must be a URL, got {v.shown(url)}")
        if url not in self.files:
            try:
                data = self.fetch(url)
            except SpecError as exc:
                raise self.refuse(key, url, f"{key}: {exc.message}") from None
            except (OSError, ValueError) as exc:
                raise self.refuse(key, url, f"{key}: cannot fetch {url!r}: {exc}") from None
            self.files[url] = bytes(data)
        return url

    def home(self, key: str, path: object) -> str:
        """An OSWorld path as a path in the seat's home: ``/home/user/X``, ``~/X`` and a relative ``X`` (OSWorld's
        server runs in /home/user: server/osworld_server.service's WorkingDirectory) all become ``X``."""
        if isinstance(path, str) and path:
            rest = path
            for prefix in (OSWORLD_HOME + "/", "~/"):
                if path.startswith(prefix):
                    rest = path[len(prefix):]
                    break
            if not rest.startswith(("/", "~")):
                try:
                    return v.home_path(key, rest)
                except SpecError:
                    pass
        raise self.refuse(key, path, f"{key} is {v.shown(path)}, a path cud cannot map onto the seat's home: only "
                                     f"{OSWORLD_HOME}/…, ~/… and relative paths map (OSWorld's VM user is 'user'; the "
                                     f"seat's home takes {OSWORLD_HOME}'s place), without '..', '.', '//' or control "
                                     f"characters")

    def fill(self, key: str, text: str) -> str:
        """OSWorld's placeholders in a command filled from the spec's screen, as SetupController._execute_setup
        does (the halves first); ``{CLIENT_PASSWORD}`` is refused: a seat's user has no sudo password."""
        if PASSWORD in text:
            raise self.refuse(key, text, f"{key} uses {PASSWORD}, OSWorld's VM user's sudo password: a cud seat's "
                                         f"user has none, and spec commands never run as root")
        width, height = self.screen
        for name, value in (("{SCREEN_WIDTH_HALF}", width // 2), ("{SCREEN_HEIGHT_HALF}", height // 2),
                            ("{SCREEN_WIDTH}", width), ("{SCREEN_HEIGHT}", height)):
            text = text.replace(name, str(value))
        return text


def placeholders(value: object) -> list[str]:
    """Every OSWorld placeholder left anywhere in ``value`` (a spec mapping), as ``KEY: PLACEHOLDER``."""
    found: list[str] = []

    def walk(at: str, node: object) -> None:
        if isinstance(node, str):
            found.extend(f"{at}: {m.group(0)}" for m in _PLACEHOLDER.finditer(node))
        elif isinstance(node, Mapping):
            for name, child in node.items():
                walk(v.join(at, str(name)), child)
        elif isinstance(node, list | tuple):
            for i, child in enumerate(node):
                walk(v.join(at, i), child)

    walk("", value)
    return found
