"""The user a seat's session runs as: looked up once, never root, and what a child needs to become it."""

from __future__ import annotations

import dataclasses
import os
import pwd
from typing import Any

from cud.errors import ConfigError

__all__ = ("SeatUser", "judge_account")


@dataclasses.dataclass(frozen=True)
class SeatUser:
    name: str
    uid: int
    gid: int
    #: Its supplementary groups (the primary one included), as login would give them.
    groups: tuple[int, ...]

    @classmethod
    def lookup(cls, key: str, value: str | int) -> SeatUser:
        """The user ``value`` (a name or a uid) names; refused, naming ``key``, if it is root or does not exist."""
        try:
            entry = pwd.getpwuid(value) if isinstance(value, int) else pwd.getpwnam(value)
        except KeyError:
            raise ConfigError(f"config key {key!r} names a user {value!r} that does not exist", key=key,
                              value=repr(value)) from None
        if entry.pw_uid == 0:
            # A seat's user runs what the model decides; as root that would be the machine.
            raise ConfigError(f"config key {key!r} names {value!r}, which is root (uid 0): a seat's session runs "
                              "what the model decides, so it needs a user of its own", key=key, value=repr(value))
        if os.geteuid() != 0 and entry.pw_uid != os.geteuid():
            raise ConfigError(f"config key {key!r} names {value!r} (uid {entry.pw_uid}), but the daemon runs as uid "
                              f"{os.geteuid()}, not root: it can run a session only as itself", key=key,
                              value=repr(value))
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid,
                   tuple(os.getgrouplist(entry.pw_name, entry.pw_gid)))

    @property
    def is_self(self) -> bool:
        """The daemon runs as this user (a daemon that is not root can only run a seat of its own user)."""
        return os.geteuid() == self.uid

    def become(self) -> dict[str, Any]:
        """The keyword arguments that make a child process this user (subprocess's documented way)."""
        if self.is_self:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


def judge_account(key: str, name: str) -> SeatUser | None:
    """The user ``name`` a daemon run as root runs a metric's judge as (refused, naming ``key``, if it is root or does
    not exist); None for a daemon that is not root: it can run the judge only as itself."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        raise ConfigError(f"config key {key!r} names a user {name!r} that does not exist", key=key,
                          value=repr(name)) from None
    if uid == 0:
        # The judge parses files the model made (a spreadsheet, a document): a parser's flaw must not be root's.
        raise ConfigError(f"config key {key!r} names {name!r}, which is root (uid 0): a metric's judge parses "
                          "what the model made, so it runs as a user with no rights of its own", key=key,
                          value=repr(name))
    return SeatUser.lookup(key, name) if os.geteuid() == 0 else None
