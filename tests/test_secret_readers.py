"""Issue 41, item 5: a secret the daemon reads (``api_key_file``, ``vnc_password_file``, a hook's ``secret_file``)
that a seat's user can read is refused at config load: that user runs the model's commands, which could send it
anywhere. Readable as the kernel decides it: owner, group (primary or supplementary) or others' bits, a POSIX
ACL, and directories above the user may search. Real users, groups, modes and ACLs; the config loaded for real."""

from __future__ import annotations

import os
import secrets
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.daemon.config import load_config
from cud.daemon.session.user import SeatUser
from cud.errors import ConfigError
from tests.support.seat_users import SeatUsers, make_home


@pytest.fixture(scope="module")
def user(seat_users: SeatUsers) -> Iterator[SeatUser]:
    """A seat's user in a supplementary group of its own besides its primary one."""
    made = seat_users.make()
    group = f"cud-g{secrets.token_hex(4)}"
    subprocess.run(["groupadd", "--system", group], check=True, capture_output=True)
    try:
        subprocess.run(["usermod", "-aG", group, made.name], check=True, capture_output=True)
        yield SeatUser.lookup("user", made.name)
    finally:
        subprocess.run(["groupdel", group], capture_output=True)


def _extra_gid(user: SeatUser) -> int:
    return next(gid for gid in user.groups if gid != user.gid)


def _acl_reading(uid: int) -> bytes:
    """A POSIX access ACL (the kernel's xattr form, version 2) letting ``uid`` read: owner rw, that user r."""
    entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 4, uid), (0x04, 0, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
               (0x20, 0, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)


def _make(base: Path, user: SeatUser, *, mode: int, gid: str = "root", uid: str = "root", dir_mode: int = 0o755,
          dir_gid: str = "root", link: bool = False, acl: bool = False) -> Path:
    """``base/keys/key`` holding a secret, as the case says (``gid``: root, primary or extra, the user's)."""
    gids = {"root": 0, "primary": user.gid, "extra": _extra_gid(user)}
    keys = base / "keys"
    keys.mkdir()
    os.chown(keys, 0, gids[dir_gid])
    keys.chmod(dir_mode)
    path = keys / "key"
    path.write_text("sk-secret\n")
    os.chown(path, user.uid if uid == "user" else 0, gids[gid])
    path.chmod(mode)
    if acl:
        os.setxattr(path, "system.posix_acl_access", _acl_reading(user.uid))
    if link:  # another name for it, in a directory everyone may search
        os.link(path, base / "another-name")
    return path


#: (case, how the file is made, the words of the refusal; None: accepted).
_CASES: list[tuple[str, dict[str, object], str | None]] = [
    ("0644 root", {"mode": 0o644}, "it can be read by every user (mode 0644), seat 'one''s too; chmod 600"),
    ("0640, the user's primary group", {"mode": 0o640, "gid": "primary"},
     "it can be read by seat 'one''s user, through its group (gid {primary}, mode 0640); chmod 600"),
    ("0640, a supplementary group of the user", {"mode": 0o640, "gid": "extra"},
     "it can be read by seat 'one''s user, through its group (gid {extra}, mode 0640)"),
    ("0600 the seat user's", {"mode": 0o600, "uid": "user"},
     "it can be written by seat 'one''s user, who owns it"),
    ("0400 the seat user's", {"mode": 0o400, "uid": "user"},
     "it can be written by seat 'one''s user, who owns it"),
    ("0600 root with an ACL for the user", {"mode": 0o600, "acl": True},
     "it can be read by seat 'one''s user, as its POSIX ACL may allow; remove the ACL (setfacl -b)"),
    ("0644 in a 0750 directory of the user's group", {"mode": 0o644, "dir_mode": 0o750, "dir_gid": "extra"},
     "it can be read by every user (mode 0644)"),
    ("0644 in a 0700 root directory, with another name outside", {"mode": 0o644, "dir_mode": 0o700, "link": True},
     "it can be read by every user (mode 0644)"),
    ("0600 root", {"mode": 0o600}, None),
    ("0640 root's group", {"mode": 0o640}, None),
    ("0644 in a 0700 root directory", {"mode": 0o644, "dir_mode": 0o700}, None),
    ("0644 in a 0701 root directory of the user's group, whose bits (0) are the user's",
     {"mode": 0o644, "dir_mode": 0o701, "dir_gid": "primary"}, None),
    ("0604 of the user's group, whose bits (0) are the user's", {"mode": 0o604, "gid": "extra"}, None),
]


def _config(base: Path, user: SeatUser, key: str, path: Path) -> Path:
    home = base / "h"
    if not home.exists():
        make_home(base, user, "h")
    top = {"api_key_file": f'api_key_file = "{path}"\n',
           "notify[0].secret_file": f'[[notify]]\nwebhook = "http://127.0.0.1:9/x"\nsecret_header = "Authorization"\n'
                                    f'secret_file = "{path}"\n',
           "metrics.textfile": f'[metrics]\ntextfile = "{path}"\n'}.get(key, "")
    where = f'vnc = "127.0.0.1::5900"\nvnc_password_file = "{path}"' if key == "vnc_password_file" else 'display = ":1"'
    config = base / "cud.toml"
    config.write_text(f'socket = "{base}/state/cud.sock"\nstate_dir = "{base}/state"\n{top}'
                      f'[[seats]]\nname = "one"\n{where}\nuser = "{user.name}"\nhome = "{home}"\n')
    return config


@pytest.mark.parametrize("key", ["api_key_file", "vnc_password_file", "notify[0].secret_file"])
@pytest.mark.parametrize(("case", "how", "words"), _CASES, ids=[case for case, _how, _words in _CASES])
def test_a_secret_a_seats_user_can_read_is_refused_naming_key_value_user_and_fix(
        session_dir: Path, user: SeatUser, key: str, case: str, how: dict[str, object], words: str | None) -> None:
    path = _make(session_dir, user, **how)  # type: ignore[arg-type]
    config = _config(session_dir, user, key, path)
    if words is None:
        load_config(config, env={})
        return
    with pytest.raises(ConfigError) as refused:
        load_config(config, env={})
    shown = f"seats[0].{key}" if key == "vnc_password_file" else key
    assert f"config key '{shown}' = {str(path)!r} is refused: " in refused.value.message, refused.value.message
    assert words.format(primary=user.gid, extra=_extra_gid(user)) in refused.value.message, refused.value.message
    assert refused.value.details["key"] == shown


def test_the_metrics_textfile_is_written_for_others_to_read_so_it_may_be_readable(session_dir: Path,
                                                                                  user: SeatUser) -> None:
    """Not a secret: node_exporter reads it; only a seat's user writing it is refused (test_session_config)."""
    path = _make(session_dir, user, mode=0o644)
    assert load_config(_config(session_dir, user, "metrics.textfile", path), env={}).metrics.textfile == path


def test_a_daemon_without_session_seats_has_no_seat_user_to_keep_out(session_dir: Path, user: SeatUser) -> None:
    path = _make(session_dir, user, mode=0o644)
    config = session_dir / "plain.toml"
    config.write_text(f'socket = "{session_dir}/state/cud.sock"\nstate_dir = "{session_dir}/state"\n'
                      f'api_key_file = "{path}"\n[[seats]]\nname = "one"\ndisplay = ":1"\n')
    assert load_config(config, env={}).api_key_file == path

