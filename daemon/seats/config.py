"""Which displays the daemon drives: its seats, from ``--seat`` flags, ``[[seats]]`` tables or one display.

Three spellings, one result (a tuple of :class:`SeatConfig`, in the order given,
which is also the order free seats take unpinned work):

* ``cud run --seat NAME=DISPLAY`` (repeatable, X11);
* ``[[seats]]`` tables in the config: ``name`` and ``display``, or ``vnc`` with
  ``vnc_password_file`` / ``vnc_horizontal_scroll``; with ``user``, ``home`` and
  ``home_template`` a seat has a session (cud.daemon.session: commands, files, the reset);
  ``tags`` label it for the tasks that ask for them (``seat_tags``, cud.seat_needs);
* today's single ``display`` / ``vnc`` (flag, config key or ``$DISPLAY``): one seat
  named ``default``, so configs and commands from before seats keep working.

Flags replace what the file says: ``--seat``, ``--display`` or ``--vnc`` on the
command line override the file's seats as a whole.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from cud.daemon.config_values import bad, string, tags
from cud.daemon.config_values import table as checked_table
from cud.daemon.session.egress import parse_allowed
from cud.daemon.session.namespace import Isolation
from cud.daemon.session.places import Place, check_existing_homes, check_places, check_secrets
from cud.daemon.session.taken import taken_homes
from cud.daemon.session.user import SeatUser
from cud.errors import ConfigError
from cud.protocol import SEAT_NAME

__all__ = ("DEFAULT_SEAT", "MAX_SEATS", "SEAT_KEYS", "SeatConfig", "check_seat_places", "load_seats")

#: The name of the one seat of a daemon configured with a single display or VNC server.
DEFAULT_SEAT = "default"
#: Each seat holds a driver thread and a display connection or two; far more than a
#: 2-core VM runs, far fewer than the daemon's file descriptors.
MAX_SEATS = 64
#: The keys of a ``[[seats]]`` table.
SEAT_KEYS = frozenset({"name", "display", "vnc", "vnc_password_file", "vnc_horizontal_scroll", "session_bus",
                       "x_display", "user", "home", "home_template", "empty_existing_home", "session_unit",
                       "private_tmp", "home_path", "network", "tags"})
#: Where a seat's targets are read (docs/targets.md): its session bus, and for a VNC seat the X display it mirrors.
_TARGET_KEYS = ("session_bus", "x_display")
#: A seat's session (docs/sessions.md); like the target keys, top-level keys of a one-seat config too.
_SESSION_KEYS = ("user", "home", "home_template", "empty_existing_home", "session_unit", "private_tmp", "home_path",
                 "network")
#: The keys that give a seat's session namespaces of its own (cud.daemon.session.namespace).
_ISOLATION_KEYS = ("private_tmp", "home_path", "network")
#: A service unit's name as systemd spells it (systemd.unit(5)): a template's instance must be given.
_SERVICE_NAME = re.compile(r"[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]+)?\.service")
_MAX_UNIT_NAME = 255
#: Entries of one seat's network allow-list: one nftables rule each, checked in order for every new connection.
_MAX_ALLOWED = 256
_HORIZONTAL_SCROLL = ("auto", "buttons", "shift")


@dataclasses.dataclass(frozen=True)
class SeatConfig:
    name: str
    display: str | None = None
    vnc: str | None = None
    vnc_password_file: Path | None = None
    #: How scroll_x reaches a VNC server: see cud.drivers.vnc.HORIZONTAL_SCROLL_MODES.
    vnc_horizontal_scroll: str = "auto"
    #: The D-Bus address of the session bus its applications use (their accessibility bus is found there).
    session_bus: str | None = None
    #: For a VNC seat: the X display it shows (Xvnc's own, or the one x11vnc shares), to read windows from.
    x_display: str | None = None
    #: The seat's session (docs/sessions.md): its user (never root), its home, what a reset makes the home again.
    user: SeatUser | None = None
    home: Path | None = None
    home_template: Path | None = None
    #: The reset may empty an existing home holding entries cud did not put there (else config load refuses it).
    empty_existing_home: bool = False
    #: The systemd unit that is the seat's session (docs/sessions.md#under-systemd); None: cud's own process groups.
    session_unit: str | None = None
    #: Private temp directories, the home at ``home_path``, the network (docs/sessions.md#a-seat-of-its-own).
    isolation: Isolation = Isolation()
    #: Its labels: its ``[[seats]] tags``, then the node-wide ``[fleet] tags`` (a task's ``seat_tags`` picks by them).
    tags: tuple[str, ...] = ()

    @property
    def target_display(self) -> str | None:
        """The X display the seat's targets are read from (None: a VNC seat that names none)."""
        return self.display if self.display is not None else self.x_display

    @property
    def where(self) -> str:
        """The display or VNC address, as configured."""
        return self.display or self.vnc or ""


def check_display(key: str, value: object) -> str:
    text = string(key, value)
    _host, colon, rest = text.rpartition(":")
    number = rest.split(".")[0]
    if not colon or not number.isdigit():
        raise bad(key, value, "an X display like ':0' or ':1.0'")
    return text


def check_vnc(key: str, value: object) -> str:
    text = string(key, value)
    host, sep, port = text.rpartition("::")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise bad(key, value, "HOST::PORT, e.g. '127.0.0.1::5900'")
    return text


def check_bus(key: str, value: object) -> str:
    text = string(key, value)
    transport, colon, rest = text.partition(":")
    if not colon or not transport or "=" not in rest:
        raise bad(key, value, "a D-Bus address like 'unix:path=/run/user/1000/bus'")
    return text


def _seat(prefix: str, name: str, table: Mapping[str, Any]) -> SeatConfig:
    """One seat from ``table``, with where its targets are read from."""
    seat = _place(prefix, name, table)
    extra: dict[str, Any] = {}  # str, a tuple of tags
    if "session_bus" in table:
        extra["session_bus"] = check_bus(f"{prefix}session_bus", table["session_bus"])
    if "x_display" in table:
        if seat.vnc is None:
            raise ConfigError(f"config key '{prefix}x_display' is for a VNC seat; an X seat reads its own display",
                              key=f"{prefix}x_display")
        extra["x_display"] = check_display(f"{prefix}x_display", table["x_display"])
    if "tags" in table:
        extra["tags"] = tags(f"{prefix}tags", table["tags"])
    return dataclasses.replace(seat, **extra, **_session(prefix, table))


def _session(prefix: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """``user``, ``home`` and ``home_template``: all or none of the first two, the template only with them."""
    given = [k for k in ("user", "home") if k in table]
    if len(given) == 1:
        missing = "home" if given == ["user"] else "user"
        raise ConfigError(f"config key '{prefix}{given[0]}' needs '{prefix}{missing}': a seat's session has both",
                          key=f"{prefix}{missing}")
    for key in ("home_template", "empty_existing_home", "session_unit", *_ISOLATION_KEYS):
        if key in table and not given:
            raise ConfigError(f"config key '{prefix}{key}' needs '{prefix}user' and '{prefix}home'",
                              key=f"{prefix}{key}")
    if not given:
        return {}
    user = table["user"]
    if isinstance(user, bool) or not isinstance(user, (str, int)):
        raise bad(f"{prefix}user", user, "a user name or uid")
    out: dict[str, Any] = {
        "user": SeatUser.lookup(f"{prefix}user", user if isinstance(user, int) else string(f"{prefix}user", user)),
        "home": _absolute(f"{prefix}home", table["home"]),
    }
    if "home_template" in table:
        out["home_template"] = _absolute(f"{prefix}home_template", table["home_template"])
    if "empty_existing_home" in table:
        if not isinstance(table["empty_existing_home"], bool):
            raise bad(f"{prefix}empty_existing_home", table["empty_existing_home"], "true or false")
        out["empty_existing_home"] = table["empty_existing_home"]
    if "session_unit" in table:
        out["session_unit"] = check_service_unit(f"{prefix}session_unit", table["session_unit"])
    isolation = _isolation(prefix, table)
    if isolation.asked:
        # With a session unit systemd makes the namespaces (its command units' settings: cud.daemon.session.unit);
        # an allow-list is nftables rules the daemon loads, which needs root in any case.
        if os.geteuid() != 0 and ("session_unit" not in out or isolation.allowed):
            key = next(k for k in _ISOLATION_KEYS if k in table)
            raise ConfigError(f"config key '{prefix}{key}' = {table[key]!r} needs a daemon run as root: the "
                              "session's namespaces are made and entered, and nftables rules loaded, with "
                              f"capabilities this daemon (uid {os.geteuid()}) does not have; remove the key or run "
                              "the daemon as root",
                              key=f"{prefix}{key}")
        out["isolation"] = isolation
    return out


def _isolation(prefix: str, table: Mapping[str, Any]) -> Isolation:
    """``private_tmp``, ``home_path`` and ``network`` (cud.daemon.session.namespace)."""
    private = table.get("private_tmp", False)
    if not isinstance(private, bool):
        raise bad(f"{prefix}private_tmp", private, "true or false")
    home_path = None
    if "home_path" in table:
        home_path = string(f"{prefix}home_path", table["home_path"])
        name = home_path.removeprefix("/home/")
        # Only /home/NAME: the session's /home is a tmpfs of its own holding the home alone, so nothing of the
        # host's is hidden that a desktop needs (a home_path in /var/lib would cover the packages' state).
        if not home_path.startswith("/home/") or not name or "/" in name or name in (".", ".."):
            raise bad(f"{prefix}home_path", home_path, "a directory directly in /home, like '/home/user' (the "
                                                        "session's /home holds the seat's home alone)")
    network = table.get("network", "host")
    if isinstance(network, list):
        if not network or len(network) > _MAX_ALLOWED:
            raise bad(f"{prefix}network", network, f"a list of 1 to {_MAX_ALLOWED} addresses or CIDRs")
        allowed = tuple(parse_allowed(f"{prefix}network[{index}]", entry) for index, entry in enumerate(network))
        return Isolation(private, home_path, "allow", allowed)
    if network not in ("host", "none"):
        raise bad(f"{prefix}network", network, "'host', 'none', or a list of the addresses or CIDRs (each with "
                                               "':PORT' for one port only) the session may connect to")
    return Isolation(private, home_path, network)


def check_service_unit(key: str, value: object) -> str:
    """A systemd service's name (``cud-session@1.service``); a template needs its instance."""
    text = string(key, value)
    if len(text) > _MAX_UNIT_NAME or not _SERVICE_NAME.fullmatch(text):
        raise bad(key, value, "a systemd service unit's name like 'cud-session@1.service' (a template with its "
                              "instance)")
    return text


def _absolute(key: str, value: object) -> Path:
    text = string(key, value)
    if not text.startswith("/"):
        raise bad(key, value, "an absolute path")
    return Path(text)


def check_seat_places(seats: tuple[SeatConfig, ...], daemon_dirs: Mapping[str, str], daemon_home: str | None, *,
                      tables: bool = True, files: Mapping[str, Path] | None = None,
                      written: Collection[str] = (), state_dir: Path | None = None) -> None:
    """Refuse a seat's home, template or user that a reset must not touch, and a file of the daemon's a seat's
    user could reach (cud.daemon.session.places).

    ``tables``: the seats came from ``[[seats]]`` (errors name ``seats[N].home``), else top-level keys.
    ``files``: the daemon's secrets and the files it writes, by config key (each seat's ``vnc_password_file`` is
    added here); ``written``: those of ``files`` the daemon writes for others to read, not secrets.
    ``state_dir``: where the daemon recorded the homes it made or took (cud.daemon.session.taken).
    """
    prefix = [f"seats[{index}]." if tables else "" for index in range(len(seats))]
    places = [Place(seat.name, prefix[index], str(seat.home),
                    None if seat.home_template is None else str(seat.home_template), seat.user.uid,
                    seat.user.name, seat.user.groups, seat.empty_existing_home)
              for index, seat in enumerate(seats) if seat.home is not None and seat.user is not None]
    if places:
        check_places(places, daemon_dirs=daemon_dirs, daemon_home=daemon_home)
    for index, seat in enumerate(seats):
        _check_home_path(seat, prefix[index], daemon_dirs)
    secrets = {key: str(path) for key, path in (files or {}).items()}
    secrets.update({f"{prefix[index]}vnc_password_file": str(seat.vnc_password_file)
                    for index, seat in enumerate(seats) if seat.vnc_password_file is not None})
    check_secrets(secrets, places, written=written)
    if places and state_dir is not None:
        check_existing_homes(places, taken_homes(state_dir))


def _check_home_path(seat: SeatConfig, prefix: str, daemon_dirs: Mapping[str, str]) -> None:
    """A ``home_path`` may not be a place of the daemon's: the session's /home holds the seat's home alone, so the
    daemon's state or socket there would be hidden under it (and mistaken for the home by whoever reads the
    config)."""
    home_path = seat.isolation.home_path
    if home_path is None:
        return
    for what, place in daemon_dirs.items():
        real = os.path.realpath(place)
        if real == home_path or real.startswith(home_path + "/"):
            raise ConfigError(f"seat {seat.name!r}: config key '{prefix}home_path' = {home_path!r} is refused: "
                              f"{what} {place!r} is there", key=f"{prefix}home_path", value=repr(home_path))


def _place(prefix: str, name: str, table: Mapping[str, Any]) -> SeatConfig:
    """One seat from ``table`` (keys display / vnc / vnc_*), its errors named under ``prefix``."""
    key = f"{prefix}display" if prefix else "display"
    if "display" in table and "vnc" in table:
        raise ConfigError(f"config keys '{prefix}display' and '{prefix}vnc' exclude each other; give one", key=key)
    for option in ("vnc_password_file", "vnc_horizontal_scroll"):
        if option in table and "vnc" not in table:
            raise ConfigError(f"config key '{prefix}{option}' needs '{prefix}vnc'", key=f"{prefix}{option}")
    if "vnc" in table:
        scroll = table.get("vnc_horizontal_scroll", "auto")
        if scroll not in _HORIZONTAL_SCROLL:
            raise bad(f"{prefix}vnc_horizontal_scroll", scroll, "'auto', 'buttons' or 'shift'")
        password = table.get("vnc_password_file")
        return SeatConfig(
            name,
            vnc=check_vnc(f"{prefix}vnc", table["vnc"]),
            vnc_password_file=None if password is None else Path(string(f"{prefix}vnc_password_file", password)),
            vnc_horizontal_scroll=scroll,
        )
    if "display" not in table:
        raise ConfigError(f"seat {name!r} needs '{prefix}display' or '{prefix}vnc'", key=key)
    return SeatConfig(name, display=check_display(key, table["display"]))


def _name(key: str, value: object) -> str:
    if not isinstance(value, str) or not SEAT_NAME.fullmatch(value):
        raise bad(key, value, "a seat name: a letter or digit, then letters, digits, '_', '.' or '-' (at most 32)")
    return value


def _from_flags(flags: list[str]) -> list[SeatConfig]:
    seats = []
    for flag in flags:
        name, sep, display = flag.partition("=")
        if not sep:
            raise ConfigError(f"--seat {flag!r} must be NAME=DISPLAY, e.g. 'left=:1'", key="seat", value=repr(flag))
        seats.append(SeatConfig(_name("--seat", name), display=check_display("--seat", display)))
    return seats


def _from_tables(value: object) -> list[SeatConfig]:
    if not isinstance(value, list) or not value or not all(isinstance(t, dict) for t in value):
        raise bad("seats", value, "one or more [[seats]] tables")
    seats = []
    for index, table in enumerate(value):
        prefix = f"seats[{index}]."
        checked_table(prefix[:-1], table, SEAT_KEYS)
        if "name" not in table:
            raise ConfigError(f"config table '{prefix[:-1]}' needs a 'name'", key=f"{prefix}name")
        seats.append(_seat(prefix, _name(f"{prefix}name", table["name"]), table))
    return seats


def _distinct(seats: list[SeatConfig]) -> tuple[SeatConfig, ...]:
    if len(seats) > MAX_SEATS:
        raise ConfigError(f"{len(seats)} seats configured; the limit is {MAX_SEATS}", key="seats", count=len(seats))
    names: dict[str, SeatConfig] = {}
    places: dict[str, SeatConfig] = {}
    for seat in seats:
        if seat.name in names:
            raise ConfigError(f"two seats are named {seat.name!r}", key="seats", value=repr(seat.name))
        # Two seats on one display would type into each other's tasks.
        other = places.get(seat.where)
        if other is not None:
            raise ConfigError(f"seats {other.name!r} and {seat.name!r} both drive {seat.where!r}", key="seats",
                              value=repr(seat.where))
        names[seat.name] = places[seat.where] = seat
    return tuple(seats)


def load_seats(raw: Mapping[str, Any], flags: Mapping[str, Any], env: Mapping[str, str]) -> tuple[SeatConfig, ...]:
    """The seats from the command line's ``flags`` (None: unset), else the config file's ``raw`` keys."""
    seat_flags = flags.get("seat") or []
    single_flags = {k: flags[k] for k in ("display", "vnc", "vnc_password_file") if flags.get(k) is not None}
    if seat_flags and single_flags:
        given = "/".join(f"--{k.replace('_', '-')}" for k in single_flags)
        raise ConfigError(f"--seat and {given} exclude each other: give seats, or one display", key="seat")
    if seat_flags:
        return _distinct(_from_flags(seat_flags))
    file_single = {k: raw[k] for k in ("display", "vnc", "vnc_password_file", "vnc_horizontal_scroll",
                                       *_TARGET_KEYS, *_SESSION_KEYS) if k in raw}
    if "seats" in raw and not (single_flags.keys() & {"display", "vnc"}):
        if file_single:
            key = next(iter(file_single))
            raise ConfigError(f"config key {key!r} and [[seats]] exclude each other; put it in a seat's table",
                              key=key)
        return _distinct(_from_tables(raw["seats"]))
    table = {**file_single, **single_flags}
    # --vnc on the command line wins over a display in the file, and the other way round.
    if "vnc" in single_flags:
        table.pop("display", None)
    if "display" in single_flags:
        table.pop("vnc", None)
        table.pop("x_display", None)  # the VNC seat's, which the flag replaced
    if "display" not in table and "vnc" not in table:
        if not env.get("DISPLAY"):
            raise ConfigError("no display: pass --display :N, --seat NAME=:N or --vnc HOST::PORT, or set DISPLAY",
                              key="display")
        table["display"] = env["DISPLAY"]
    return (_seat("", DEFAULT_SEAT, table),)
