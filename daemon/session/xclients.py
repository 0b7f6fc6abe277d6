"""The X side of a session: who is connected to the seat's display, who owns the clipboard.

Blocking python-xlib calls, each on a connection of its own that is closed at the
end (callers run them in a thread with a deadline). The X-Resource extension names
each client's process (``LocalClientPIDMask``) and the range of resource ids it owns;
a window belongs to the client whose range holds its id. The window manager is the
client that owns the ``WM_S<screen>`` selection (ICCCM 2.8): every WM that manages
a screen holds it.

The display's host access list (``xhost``) is the server's, not a client's: it outlives
every client that changed it for as long as the server does not reset, and the server
does not while the window manager or the daemon stay connected. So a seat's user who ran
``xhost +`` or ``xhost +si:localuser:NAME`` would leave the display open, without its
cookie, to every local user for every later task; :func:`close_access` shuts it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Iterator

from Xlib import X
from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.ext import res
from Xlib.protocol import request as xrequest
from Xlib.protocol import rq

from cud.drivers.xlib_display import open_display

__all__ = ("XClient", "clear_selections", "close_access", "kill_clients", "selection_owners", "session_clients")

#: The selections a session's clipboard is: Ctrl+C/Ctrl+V's, and select/middle-click's.
SELECTIONS = ("CLIPBOARD", "PRIMARY")
#: How deep the window tree is searched for a client's mapped windows (a WM frame, the app, its children).
_TREE_DEPTH = 3


@dataclasses.dataclass(frozen=True)
class XClient:
    #: The first resource id the client owns, which names it (XKillClient takes any id of it).
    base: int
    mask: int
    #: Its process on this machine (None: the server could not tell, a remote client).
    pid: int | None
    #: It is the window manager (it owns WM_S<screen>).
    wm: bool = False
    #: It has a window on screen (mapped): something a person sees.
    visible: bool = False

    def owns(self, resource: int) -> bool:
        return resource & ~self.mask == self.base


@contextlib.contextmanager
def _connect(name: str) -> Iterator[xdisplay.Display]:
    host, _colon, number = name.rpartition(":")
    if not host:  # a local display: knocked on first, as python-xlib leaks its sockets when it cannot connect
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as knock:
            try:
                knock.connect(f"/tmp/.X11-unix/X{number.split('.')[0]}")
            except OSError as exc:
                raise ConnectionError(f"the X display {name} does not answer: {exc.strerror}") from None
    conn = open_display(name)
    try:
        yield conn
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def _clients(conn: xdisplay.Display) -> list[XClient]:
    listed = conn.res_query_clients().clients
    specs = [{"client": c.resource_base, "mask": res.LocalClientPIDMask} for c in listed]
    pids = {i.spec.client: (i.value[0] if i.value else None) for i in conn.res_query_client_ids(specs).ids}
    screen = conn.screen()
    wm_window = conn.get_selection_owner(conn.intern_atom(f"WM_S{conn.get_default_screen()}"))
    mapped = list(_mapped(screen.root, _TREE_DEPTH))
    found = []
    for client in listed:
        base, mask = client.resource_base, client.resource_mask
        if base == 0:
            continue  # the server itself
        probe = XClient(base, mask, pids.get(base))
        wm = wm_window not in (0, X.NONE) and probe.owns(getattr(wm_window, "id", wm_window))
        visible = any(probe.owns(w) for w in mapped)
        found.append(dataclasses.replace(probe, wm=wm, visible=visible))
    return found


def _mapped(window: object, depth: int) -> Iterator[int]:
    """Ids of the mapped windows below ``window``, ``depth`` levels down."""
    if depth == 0:
        return
    try:
        children = window.query_tree().children  # type: ignore[attr-defined]  # python-xlib's reply objects are dynamic
    except xerror.XError:
        return  # gone meanwhile
    for child in children:
        try:
            if child.get_attributes().map_state != X.IsUnmapped:
                yield child.id
                yield from _mapped(child, depth - 1)
        except xerror.XError:
            continue


def session_clients(name: str, uid: int, keep: frozenset[int] = frozenset(), *,
                    strangers: bool = False) -> list[XClient]:
    """The clients of ``name`` that are the session's: a process of ``uid``, or anything on screen but the WM.

    ``keep``: pids never counted (the daemon itself, which reads the screen). ``strangers``: also every
    client that is not a process of root, of the daemon's user or of the X server's (or whose process the
    server cannot name): what may have come in while the session had the display's door open
    (:func:`close_access`), without a window, to watch and type into later tasks.
    """
    with _connect(name) as conn:
        own = {os.getpid(), *keep}
        trusted = _trusted_uids(name) if strangers else None
        return [c for c in _clients(conn) if not c.wm and c.pid not in own and _goes(c, uid, trusted)]


def _goes(client: XClient, uid: int, trusted: set[int] | None) -> bool:
    if client.visible:
        return True
    owner = None if client.pid is None else _uid_of(client.pid)
    return owner == uid or (trusted is not None and owner not in trusted)


def _trusted_uids(name: str) -> set[int]:
    """Root, the daemon's user and the X server's (the owner of its socket): who may hold the cookie."""
    trusted = {0, os.geteuid()}
    host, _colon, number = name.rpartition(":")
    if not host:
        with contextlib.suppress(OSError):
            trusted.add(os.stat(f"/tmp/.X11-unix/X{number.split('.')[0]}").st_uid)
    return trusted


def kill_clients(name: str, clients: list[XClient]) -> None:
    """XKillClient each of ``clients``: the server closes its connection and destroys its windows."""
    with _connect(name) as conn:
        for client in clients:
            xrequest.KillClient(display=conn.display, resource=client.base)
        conn.sync()


def selection_owners(name: str) -> dict[str, int]:
    """Which window owns each of :data:`SELECTIONS` (0: none)."""
    with _connect(name) as conn:
        owners = {}
        for selection in SELECTIONS:
            owner = conn.get_selection_owner(conn.intern_atom(selection))
            owners[selection] = 0 if owner in (0, X.NONE) else getattr(owner, "id", owner)
        return owners


def clear_selections(name: str) -> None:
    """Leave :data:`SELECTIONS` without an owner (any client may; the old owner is told it lost them)."""
    with _connect(name) as conn:
        for selection in SELECTIONS:
            # python-xlib sets an owner only through a window; None is the protocol's own request.
            xrequest.SetSelectionOwner(display=conn.display, window=X.NONE, selection=conn.intern_atom(selection),
                                       time=X.CurrentTime)
        conn.sync()


class _ChangeHosts(rq.Request):
    """ChangeHosts (opcode 109) with any family: python-xlib's own admits five families and refuses
    FamilyLocalHost (252, ``xhost +local:``, every local connection let in), which ListHosts does report."""

    _request = rq.Struct(
        rq.Opcode(109),
        rq.Set("mode", 1, (X.HostInsert, X.HostDelete)),
        rq.RequestLength(),
        rq.Card8("host_family"),
        rq.Pad(1),
        rq.LengthOf("host", 2),
        rq.List("host", rq.Card8Obj),
    )


def close_access(name: str) -> tuple[bool, list[str]]:
    """Turn access control on and delete every entry of the host access list, server-interpreted ones
    (``si:localuser:NAME``, family 5, ``b"localuser\\0NAME"``) and ``local:`` included; then read it back.

    Returns whether the door was open (access control off, or any entry), and what still lets a client in
    without its cookie (each as its family and address); that is empty when the display takes its cookie alone.
    """
    with _connect(name) as conn:
        before = conn.list_hosts()
        conn.set_access_control(X.EnableAccess)
        for host in before.hosts:
            _ChangeHosts(display=conn.display, mode=X.HostDelete, host_family=host.family, host=list(host.name))
        conn.sync()
        return bool(_describe(before)), _describe(conn.list_hosts())


def _describe(hosts: object) -> list[str]:
    left = [] if hosts.mode == X.EnableAccess else ["access control disabled"]  # type: ignore[attr-defined]  # a list_hosts reply
    for host in hosts.hosts:  # type: ignore[attr-defined]  # a list_hosts reply
        address = bytes(host.name)
        shown = (address.replace(b"\0", b":").decode(errors="replace") if host.family == X.FamilyServerInterpreted
                 else address.hex())
        left.append(f"family {host.family} {shown!r}")
    return left


def _uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
