"""Read the AT-SPI accessibility tree over D-Bus, from the daemon's asyncio loop.

dbus-fast is pure-Python asyncio, so a lookup is a few awaits on the daemon's own
loop (no thread, no GObject introspection in the daemon's venv). The accessibility
bus is found the way applications find it: ``org.a11y.Bus.GetAddress`` on the
seat's session bus. Interfaces (at-spi2-core's xml/*.xml):

* ``org.a11y.atspi.Accessible``: ``GetChildren() -> a(so)``, ``GetRoleName() -> s``,
  ``GetState() -> au`` (two 32-bit words of ``AtspiStateType`` bits), properties
  ``Name``, ``Description``;
* ``org.a11y.atspi.Component``: ``GetAccessibleAtPoint(i x, i y, u coord_type) -> (so)``
  (coord_type 0 = screen; the null reference ``/org/a11y/atspi/null`` when nothing
  is there), ``GetExtents(u coord_type) -> (iiii)``;
* the registry ``org.a11y.atspi.Registry`` at ``/org/a11y/atspi/accessible/root``,
  whose children are the applications, one D-Bus connection each; the connection's
  process is ``org.freedesktop.DBus.GetConnectionUnixProcessID``.

The focus is followed by events: at connect the daemon registers for
``object:state-changed:focused`` with the registry (``RegisterEvent`` on
``/org/a11y/atspi/registry``: at-spi2-core lets toolkits send only the events some
listener registered; GTK's and Qt's bridges here send focus changes regardless)
and keeps, per application, the object that last gained the focus. A lookup
checks that object's state (one call) and walks its parents, instead of walking
the window's tree; when the cache has nothing (the focus has not moved since the
connection) or its object lost the focus, the walk is the fallback. The object that last gained the focus in any application
(``last_focus``) is what the stuck guard reads after each screenshot (:meth:`Atspi.held_state`).

Nothing here bounds time itself: the caller (:mod:`cud.daemon.targets.lookup`) wraps each
lookup in one deadline and drops the connection when it passes.

Two failures are told apart: the bus or an application answered a call with a D-Bus error
(:class:`ErrorReply`: an object that is gone, an interface it lacks, which the readers below
take as "nothing there"), and the connection itself ended under a call (:class:`BusLost`),
which no reader swallows. :meth:`Atspi.look` runs one whole look and, when the connection was
lost under it, runs it once more on a new connection: the one place where a lost connection is
reconnected, for a target lookup and a spec's checks alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus

from cud.daemon.targets import dbus_writes  # noqa: F401  (every bus waits out a full socket)
from cud.daemon.targets.a11y_trust import SeatTrust, connect_a11y_bus
from cud.errors import AccessibilityError as AtspiError
from cud.protocol import STATE_NAMES

__all__ = ("App", "Atspi", "AtspiError", "BusLost", "Element", "ErrorReply", "STATE_NAMES")

ACCESSIBLE = "org.a11y.atspi.Accessible"
COMPONENT = "org.a11y.atspi.Component"
TEXT = "org.a11y.atspi.Text"
VALUE = "org.a11y.atspi.Value"
REGISTRY = "org.a11y.atspi.Registry"
A11Y_BUS = "org.a11y.Bus"
DBUS = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"
ROOT_PATH = "/org/a11y/atspi/accessible/root"
REGISTRY_PATH = "/org/a11y/atspi/registry"
FOCUS_EVENT = "object:state-changed:focused"
FOCUS_MATCH = "type='signal',interface='org.a11y.atspi.Event.Object',member='StateChanged',arg0='focused'"
#: Applications whose last focused object is kept; more means many short-lived apps: start over.
MAX_FOCUS_APPS = 256
NULL_PATH = "/org/a11y/atspi/null"
SCREEN = 0
#: What GetExtents answers for an object that has no place on the screen (G_MININT, as atk starts it).
NO_EXTENTS = -(2**31)
#: A chain deeper than this is a loop in a broken tree, not a deeper widget.
MAX_DEPTH = 64
#: Characters of a focused text read for its state (with its length): an entry's whole text, a document's start.
TEXT_LIMIT = 4096
#: States that are what a control holds (a toggle's, a row's), as against where it is or how it looks.
HELD_STATES = frozenset({"checked", "indeterminate", "expanded", "selected", "pressed"})
#: The state of an object whose children are made on demand, and how many of them may be listed
#: (the most any search reads: an element check's, a tree's; see Atspi.children).
MANAGES_DESCENDANTS = "manages-descendants"
MAX_MANAGED_CHILDREN = 5000


Ref = tuple[str, str]  # (bus name, object path)
T = TypeVar("T")


class ErrorReply(AtspiError):
    """A call was answered with a D-Bus error (an object gone, an interface it lacks): the connection is fine."""


class BusLost(AtspiError):
    """The connection to the accessibility (or session) bus ended under a call: nothing was answered."""


@dataclass
class Element:
    """One accessible object, as far as it was read."""

    ref: Ref
    role: str = ""
    name: str = ""
    description: str = ""
    states: list[str] = field(default_factory=list)
    bounds: tuple[int, int, int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "name": self.name, "description": self.description, "states": self.states,
                "bounds": list(self.bounds) if self.bounds is not None else None}


@dataclass(frozen=True)
class App:
    bus_name: str
    pid: int | None
    name: str


def _states(words: list[int]) -> list[str]:
    bits = sum(int(w) << (32 * i) for i, w in enumerate(words))
    return [name for i, name in enumerate(STATE_NAMES) if bits >> i & 1]


class Atspi:
    """One seat's view of the accessibility bus reached through ``session_bus`` (a D-Bus address); ``trust``
    names the seat and its user, whose launcher's address is confined (:mod:`cud.daemon.targets.a11y_trust`)."""

    def __init__(self, session_bus: str, trust: SeatTrust | None = None) -> None:
        self.session_bus = session_bus
        self.trust = trust
        self._bus: MessageBus | None = None
        self._apps: dict[str, App] = {}
        #: Per application bus name, the path of the object that last gained the focus (from events).
        self._focus: dict[str, str] = {}
        #: The object that last gained the focus in any application (events, or a focus lookup's find).
        self.last_focus: Ref | None = None
        self._lock = asyncio.Lock()
        #: The accessibility bus's address as the seat's launcher last gave it (None: never connected).
        self.address: str | None = None
        #: The session bus while a connection is being made on it (for what a lost call names).
        self._session: MessageBus | None = None
        #: Connections attempted so far (each asks the session bus for the address afresh).
        self.connects = 0
        #: D-Bus method calls sent so far (every one goes through :meth:`_call`): what lookups
        #: cost the bus, so that "this lookup did not ask the bus" can be observed.
        self.calls_sent = 0

    # -- connection ----------------------------------------------------------------
    async def _connect(self) -> MessageBus:
        if self._bus is not None and self._bus.connected:
            return self._bus
        async with self._lock:
            if self._bus is not None and self._bus.connected:
                return self._bus
            self._apps.clear()
            self.connects += 1
            try:
                session = await MessageBus(bus_address=self.session_bus).connect()
            except (OSError, ValueError, EOFError) as exc:
                raise AtspiError(f"the session bus {self.session_bus!r} cannot be reached: {exc}",
                                 bus=self.session_bus) from None
            self._session = session
            try:
                # Activation first, as a GetAddress to the well-known name would (cud-bus@'s bus starts the
                # launcher on demand); a bus that starts nothing answers an error, and the owner is asked anyway.
                with contextlib.suppress(ErrorReply):
                    await self._call(session, DBUS, DBUS_PATH, DBUS, "StartServiceByName", "su", [A11Y_BUS, 0])
                # The owner's unique name is asked once and used for both questions: the well-known name
                # could change hands between them (docs/targets.md, "Which accessibility bus").
                (owner,) = await self._call(session, DBUS, DBUS_PATH, DBUS, "GetNameOwner", "s", [A11Y_BUS])
                owner_uid: int | None = None
                with contextlib.suppress(ErrorReply):
                    (owner_uid,) = await self._call(session, DBUS, DBUS_PATH, DBUS, "GetConnectionUnixUser", "s",
                                                    [owner])
                (address,) = await self._call(session, str(owner), "/org/a11y/bus", A11Y_BUS, "GetAddress")
            finally:
                self._session = None
                session.disconnect()
            self.address = str(address)
            bus = await connect_a11y_bus(self.trust, self.address, None if owner_uid is None else int(owner_uid))
            self._focus.clear()
            self.last_focus = None
            bus.add_message_handler(self._on_message)
            try:
                with contextlib.suppress(ErrorReply):  # no registry, no events: the walk still finds the focus
                    await self._call(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                     "AddMatch", "s", [FOCUS_MATCH])
                    await self._call(bus, REGISTRY, REGISTRY_PATH, REGISTRY, "RegisterEvent", "s", [FOCUS_EVENT])
            except BaseException:
                bus.disconnect()
                raise
            self._bus = bus
            return bus

    def _on_message(self, message: Message) -> None:
        if (message.message_type is not MessageType.SIGNAL or message.member != "StateChanged"
                or not message.body or message.body[0] != "focused" or not message.sender or message.path is None):
            return
        if message.body[1]:
            if len(self._focus) >= MAX_FOCUS_APPS and message.sender not in self._focus:
                self._focus.clear()
            self._focus[message.sender] = message.path
            self.last_focus = (message.sender, message.path)
        elif self._focus.get(message.sender) == message.path:
            del self._focus[message.sender]
            if self.last_focus == (message.sender, message.path):
                self.last_focus = None

    def drop(self) -> None:
        """Forget the connection (after a lookup overran: its replies may still come)."""
        if self._bus is not None:
            with contextlib.suppress(Exception):
                self._bus.disconnect()
        self._bus = None

    async def look(self, read: Callable[[], Awaitable[T]]) -> T:
        """``read()`` (one whole look: a lookup, an element search), and once more if the connection was lost.

        The second time, :meth:`call` connects afresh (the session bus is asked for the address again, so a
        restarted accessibility bus is found). Only a lost connection is retried, and only once: an error
        reply, a refused address or a bus that cannot be reached is the look's answer, and so is a
        connection lost again. The caller's deadline bounds both tries together.
        """
        try:
            return await read()
        except BusLost as lost:
            first = lost.message  # that connection is closed now: the next call connects afresh
        try:
            return await read()
        except AtspiError as again:  # a plain one: no caller retries it again
            raise AtspiError(f"{first}; looking again on a new connection failed too: {again.message}",
                             **{**again.details, "bus": again.details.get("bus", self.address)}) from None

    async def _call(self, bus: MessageBus, dest: str, path: str, iface: str, member: str, sig: str = "",
                    body: list[Any] | None = None) -> list[Any]:
        self.calls_sent += 1
        try:
            reply = await bus.call(Message(destination=dest, path=path, interface=iface, member=member,
                                           signature=sig, body=body or []))
        except (OSError, EOFError) as exc:
            raise self._lost(bus, str(exc) or "the other end closed it") from None
        if reply is None:  # dbus-fast ended the connection without an error to give
            raise self._lost(bus, "it ended")
        if reply.message_type == MessageType.ERROR:
            detail = reply.body[0] if reply.body else ""
            raise ErrorReply(f"{dest} {path} {iface}.{member}: {reply.error_name} {detail}".rstrip(),
                             error=reply.error_name)
        return list(reply.body)

    def _lost(self, bus: MessageBus, why: str) -> BusLost:
        if bus is self._session:
            return BusLost(f"the connection to the session bus {self.session_bus!r} was lost: {why}",
                           bus=self.session_bus)
        return BusLost(f"the connection to the accessibility bus {self.address!r} was lost: {why}", bus=self.address)

    async def call(self, ref: Ref, iface: str, member: str, sig: str = "", body: list[Any] | None = None) -> list[Any]:
        return await self._call(await self._connect(), ref[0], ref[1], iface, member, sig, body)

    # -- applications -----------------------------------------------------------------
    async def apps(self) -> list[App]:
        """Every application on the bus, with its process id and its own name for itself."""
        bus = await self._connect()
        (children,) = await self._call(bus, REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren")
        names = [str(name) for name, _path in children]
        new = [n for n in names if n not in self._apps]
        for app in await asyncio.gather(*(self._app(bus, n) for n in new)):
            self._apps[app.bus_name] = app
        for gone in set(self._apps) - set(names):
            del self._apps[gone]
        return [self._apps[n] for n in names]

    async def _app(self, bus: MessageBus, bus_name: str) -> App:
        pid: int | None = None
        with contextlib.suppress(ErrorReply):
            (pid,) = await self._call(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                      "GetConnectionUnixProcessID", "s", [bus_name])
        name = ""
        with contextlib.suppress(ErrorReply):
            name = await self._property(bus_name, ROOT_PATH, "Name")
        return App(bus_name, int(pid) if pid is not None else None, name)

    async def app_of_pid(self, pid: int) -> App | None:
        found = next((a for a in self._apps.values() if a.pid == pid), None)
        if found is None:  # cached list may be stale: the app may have started since
            found = next((a for a in await self.apps() if a.pid == pid), None)
        return found

    # -- reading objects -----------------------------------------------------------------
    async def _property(self, bus_name: str, path: str, prop: str) -> str:
        (value,) = await self.call((bus_name, path), "org.freedesktop.DBus.Properties", "Get", "ss", [ACCESSIBLE, prop])
        return str(value.value)

    async def parent(self, ref: Ref) -> Ref | None:
        (value,) = await self.call(ref, "org.freedesktop.DBus.Properties", "Get", "ss", [ACCESSIBLE, "Parent"])
        name, path = value.value
        return None if path == NULL_PATH else (str(name), str(path))

    async def children(self, ref: Ref, *, states: Collection[str]) -> list[Ref]:
        """``ref``'s children, given its ``states``; none for a too large object that manages its descendants.

        Such an object makes each child when asked for it; a GetChildren makes them all. A
        list's few hundred rows (GTK's tree view) are quick, but LibreOffice Calc's table
        counts 2^31 - 1 cells (its ChildCount): Calc stops handling input for minutes while
        its memory grows by gigabytes (seen: the keys a model typed after a focus lookup
        never reached the sheet). So its ChildCount is asked first; past
        MAX_MANAGED_CHILDREN, which no walk here would read anyway, it is not walked.
        """
        if MANAGES_DESCENDANTS in states:
            (count,) = await self.call(ref, "org.freedesktop.DBus.Properties", "Get", "ss", [ACCESSIBLE, "ChildCount"])
            if int(count.value) > MAX_MANAGED_CHILDREN:
                return []
        (children,) = await self.call(ref, ACCESSIBLE, "GetChildren")
        return [(str(n), str(p)) for n, p in children if p != NULL_PATH]

    async def state_bits(self, ref: Ref) -> list[str]:
        (words,) = await self.call(ref, ACCESSIBLE, "GetState")
        return _states(words)

    async def extents(self, ref: Ref) -> tuple[int, int, int, int] | None:
        """Where ``ref`` is on the screen (x, y, width, height); None where it has no place."""
        try:
            (box,) = await self.call(ref, COMPONENT, "GetExtents", "u", [SCREEN])
        except ErrorReply:
            return None  # not a component (an application root, a text leaf of some toolkits)
        x, y, width, height = (int(v) for v in box)
        if NO_EXTENTS in (x, y) or width < 0 or height < 0:
            return None  # a widget never shown (GTK's idle scroll bars): the toolkit's "no extents"
        return x, y, width, height

    async def text(self, ref: Ref) -> str | None:
        """The object's text (its Text interface: an entry's content, a text view's); None if it has none."""
        try:
            (text,) = await self.call(ref, TEXT, "GetText", "ii", [0, -1])
        except ErrorReply:
            return None
        return str(text)

    async def value(self, ref: Ref) -> float | None:
        """The object's current value (its Value interface: a spin button's, a slider's); None if it has none."""
        try:
            (value,) = await self.call(ref, "org.freedesktop.DBus.Properties", "Get", "ss", [VALUE, "CurrentValue"])
        except ErrorReply:
            return None
        return float(value.value)

    async def _text_state(self, ref: Ref) -> tuple[int, str] | None:
        """The object's text length and its first TEXT_LIMIT characters; None if it has no text."""
        try:
            (count,), (text,) = await asyncio.gather(
                self.call(ref, "org.freedesktop.DBus.Properties", "Get", "ss", [TEXT, "CharacterCount"]),
                self.call(ref, TEXT, "GetText", "ii", [0, TEXT_LIMIT]))
        except ErrorReply:
            return None
        return int(count.value), str(text)

    async def held_state(self, ref: Ref) -> int | None:
        """A hash of what ``ref`` holds (its text, value and HELD_STATES) if it has the focus; None if not.

        One round of concurrent calls, each answer bounded (TEXT_LIMIT), nothing kept: an
        entry that scrolls as it fills shows the same pixels after each new character, but
        its text says it changed.
        """
        states, text, value = await asyncio.gather(self.state_bits(ref), self._text_state(ref), self.value(ref))
        if "focused" not in states:
            return None
        return hash((ref, text, value, HELD_STATES.intersection(states)))

    async def read(self, ref: Ref, *, bounds: bool = True) -> Element:
        """Role, name, description, states (and bounds): one round of concurrent calls."""
        calls: list[Coroutine[Any, Any, Any]] = [
                 self.call(ref, ACCESSIBLE, "GetRoleName"), self._property(ref[0], ref[1], "Name"),
                 self._property(ref[0], ref[1], "Description"), self.state_bits(ref)]
        if bounds:
            calls.append(self.extents(ref))
        results = await asyncio.gather(*calls)
        (role,), name, description, states = results[:4]
        return Element(ref, str(role), name, description, states, results[4] if bounds else None)

    # -- what the targets need ---------------------------------------------------------
    async def frames(self, app: App) -> list[Ref]:
        return await self.children((app.bus_name, ROOT_PATH), states=())

    async def chain_at(self, app: App, x: int, y: int) -> list[Ref]:
        """From the app's window under (x, y) down to the deepest object there ([] if none of its windows is)."""
        frames = await self.frames(app)
        boxes = await asyncio.gather(*(self.extents(f) for f in frames))
        under = [f for f, b in zip(frames, boxes, strict=True) if b is not None and _inside(b, x, y)]
        if not under:
            return []
        start = under[0]
        if len(under) > 1:  # a dialog over its parent: the active one is on top
            states = await asyncio.gather(*(self.state_bits(f) for f in under))
            start = next((f for f, s in zip(under, states, strict=True) if "active" in s), start)
        chain = [start]
        while len(chain) < MAX_DEPTH:
            try:
                (found,) = await self.call(chain[-1], COMPONENT, "GetAccessibleAtPoint", "iiu", [x, y, SCREEN])
            except ErrorReply:
                break  # an object that is no component has no children at points
            ref = (str(found[0]), str(found[1]))
            if ref[1] == NULL_PATH or ref in chain:
                break
            chain.append(ref)
        return chain

    async def focused(self, app: App, limit: int, title: str | None = None) -> list[Ref]:
        """The chain from the app's active window down to its focused object, visiting at most ``limit`` objects.

        AT-SPI has no "what has the focus" call. The object the focus events last named
        is taken if it still says so (its parents give the chain); otherwise this is a
        breadth-first walk of the showing objects under the app's active window, one
        level per round trip.
        """
        if (path := self._focus.get(app.bus_name)) is not None:
            chain = await self._focus_chain((app.bus_name, path))
            if chain:
                self.last_focus = chain[-1]
                return chain
            self._focus.pop(app.bus_name, None)
        frames = await self.frames(app)
        states = await asyncio.gather(*(self.state_bits(f) for f in frames))
        active = [f for f, s in zip(frames, states, strict=True) if "active" in s]
        if not active and title is not None:
            # Chromium marks no frame active, and keeps hidden frames with focused documents:
            # the window manager's active window, by its title, is the one.
            names = await asyncio.gather(*(self._property(f[0], f[1], "Name") for f in frames))
            active = [f for f, n in zip(frames, names, strict=True) if n == title]
        active = active or frames
        parents: dict[Ref, Ref | None] = {f: None for f in active}
        level, seen = list(active), len(active)
        best: Ref | None = None
        while level and seen <= limit:
            bits = await asyncio.gather(*(self.state_bits(r) for r in level))
            focused = next((r for r, s in zip(level, bits, strict=True) if "focused" in s), None)
            if focused is not None:
                # A focused document (Chromium's) holds the focused field: look on beneath it alone.
                best, showing = focused, [focused]
            else:
                showing = [r for r, s in zip(level, bits, strict=True) if "showing" in s or parents[r] is None]
            states_of = dict(zip(level, bits, strict=True))
            kids = await asyncio.gather(*(self.children(r, states=states_of[r]) for r in showing))
            level = []
            for parent, refs in zip(showing, kids, strict=True):
                for ref in refs[: max(0, limit - seen)]:
                    if ref not in parents:
                        parents[ref] = parent
                        level.append(ref)
                        seen += 1
        if best is None:
            return []
        self.last_focus = best
        chain = [best]
        while (up := parents[chain[-1]]) is not None:
            chain.append(up)
        return chain[::-1]

    async def _focus_chain(self, ref: Ref) -> list[Ref]:
        """From ``ref``'s window down to ``ref`` if it has the focus now, else []."""
        try:
            if "focused" not in await self.state_bits(ref):
                return []
            chain = [ref]
            while len(chain) < MAX_DEPTH and (up := await self.parent(chain[-1])) is not None and up[1] != ROOT_PATH:
                chain.append(up)
        except ErrorReply:
            return []  # gone since (a closed dialog's field)
        return chain[::-1]


def _inside(box: tuple[int, int, int, int], x: int, y: int) -> bool:
    bx, by, w, h = box
    return bx <= x < bx + w and by <= y < by + h
