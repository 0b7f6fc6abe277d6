"""``[[seats]] user``, ``home``, ``home_template`` and ``session_unit``, and the homes a reset must never
touch, refused by name."""

from __future__ import annotations

import ipaddress
import os
import pwd
import socket
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cud.daemon.config import load_config
from cud.daemon.seats.config import load_seats
from cud.daemon.session.egress import parse_allowed
from cud.daemon.session.namespace import Isolation
from cud.daemon.session.places import SYSTEM_DIRS, SYSTEM_TREES, Place, check_places
from cud.daemon.session.user import SeatUser
from cud.errors import ConfigError
from tests.support.seat_users import SeatUsers, make_home


@pytest.fixture(scope="module")
def user(seat_users: SeatUsers) -> SeatUser:
    return seat_users.make()


@pytest.fixture
def base(session_dir: Path) -> Iterator[Path]:
    yield session_dir


def config(base: Path, seats: str) -> Path:
    path = base / "cud.toml"
    path.write_text(f'socket = "{base}/state/cud.sock"\nstate_dir = "{base}/state"\n{seats}')
    return path


def seat(name: str, display: str, **keys: object) -> str:
    lines = [f'[[seats]]\nname = "{name}"\ndisplay = "{display}"']
    lines += [f"{key} = {value!r}".replace("'", '"') for key, value in keys.items()]
    return "\n".join(lines) + "\n"


def test_a_seat_with_a_session(base: Path, user: SeatUser) -> None:
    home = make_home(base, user)
    template = base / "template"
    template.mkdir()
    loaded = load_config(config(base, seat("one", ":1", user=user.name, home=str(home),
                                           home_template=str(template)) + seat("two", ":2")), env={})
    one, two = loaded.seats
    assert (one.user, one.home, one.home_template) == (user, home, template)
    assert one.session_unit is None  # without it, cud ends the session's processes itself
    assert user.uid != 0 and (two.user, two.home) == (None, None)
    # One seat may say it in top-level keys, as its display and session_bus; errors then name the key alone.
    path = base / "one.toml"
    path.write_text(f'display = ":1"\nuser = "{user.name}"\nhome = "{home}"\nhome_template = "{template}"\n')
    single = load_config(path, {"socket": f"{base}/s", "state_dir": f"{base}/state"}, env={}).seats[0]
    assert (single.name, single.user, single.home, single.home_template) == ("default", user, home, template)
    path.write_text(f'display = ":1"\nuser = "{user.name}"\nhome = "/etc"\n')
    with pytest.raises(ConfigError, match="seat 'default': config key 'home' = '/etc' is refused"):
        load_config(path, {"socket": f"{base}/s", "state_dir": f"{base}/state"}, env={})
    # A uid works as well as a name; a home that does not exist yet is made at the first reset.
    by_uid = load_config(config(base, seat("one", ":1", user=user.uid, home=str(base / "later"))), env={})
    assert by_uid.seats[0].user == user


@pytest.mark.parametrize(("keys", "words"), [
    ({"user": "root", "home": "{base}/h"}, "names 'root', which is root (uid 0)"),
    ({"user": 0, "home": "{base}/h"}, "which is root (uid 0)"),
    ({"user": "no-such-user-cud", "home": "{base}/h"}, "a user 'no-such-user-cud' that does not exist"),
    ({"user": "{user}"}, "'seats[0].user' needs 'seats[0].home'"),
    ({"home": "{base}/h"}, "'seats[0].home' needs 'seats[0].user'"),
    ({"home_template": "{base}"}, "'seats[0].home_template' needs 'seats[0].user' and 'seats[0].home'"),
    ({"session_unit": "cud-session@1.service"}, "'seats[0].session_unit' needs 'seats[0].user' and 'seats[0].home'"),
    ({"user": "{user}", "home": "{base}/h", "session_unit": "cud-session@.service"},
     "'seats[0].session_unit' must be a systemd service unit's name"),
    ({"user": "{user}", "home": "{base}/h", "session_unit": "cud-session@1.socket"}, "got 'cud-session@1.socket'"),
    ({"user": "{user}", "home": "{base}/h", "session_unit": 1}, "'seats[0].session_unit' must be a non-empty string"),
    ({"user": "{user}", "home": "relative/home"}, "must be an absolute path"),
    ({"user": "{user}", "home": "/"}, "'seats[0].home' = '/' is refused: '/' is a system directory"),
    ({"user": "{user}", "home": "/etc"}, "'/etc' is a system directory"),
    ({"user": "{user}", "home": "/usr/share/cud-seat"}, "inside the system directory '/usr'"),
    ({"user": "{user}", "home": "/tmp"}, "'/tmp' is a system directory"),
    ({"user": "{user}", "home": "/home"}, "'/home' is a system directory"),
    ({"user": "{user}", "home": "{base}/state"}, "it is the daemon's state directory"),
    ({"user": "{user}", "home": "{base}/state/seat"}, "it is inside the daemon's state directory"),
    ({"user": "{user}", "home": "{base}"}, "it holds the daemon's state directory"),
    ({"user": "{user}", "home": "{own_home}"}, "the daemon's own home"),
    ({"user": "{user}", "home": "{base}/h", "home_template": "{base}/h/tpl"},
     "'seats[0].home_template' = '{base}/h/tpl' is refused: it is inside its seat's home"),
    ({"user": "{user}", "home": "{base}/h", "home_template": "{base}/nothing"}, "not an existing directory"),
])
def test_refused_seats_are_refused_by_name(base: Path, user: SeatUser, keys: dict[str, object], words: str) -> None:
    own_home = pwd.getpwuid(os.geteuid()).pw_dir
    if "{own_home}" in str(keys.get("home")) and PurePosixPath(own_home) in {PurePosixPath(d) for d in SYSTEM_DIRS}:
        words = "is a system directory"  # root's home is /root: refused for that first
    fill = {"base": str(base), "user": user.name, "own_home": own_home}
    values = {k: v.format(**fill) if isinstance(v, str) else v for k, v in keys.items()}
    with pytest.raises(ConfigError) as refused:
        load_config(config(base, seat("one", ":1", **values)), env={})
    assert words.format(**fill) in refused.value.message
    assert "'seats[0]." in refused.value.message or "seat 'one'" in refused.value.message


def test_homes_shared_between_seats_and_homes_of_others_are_refused(base: Path, user: SeatUser,
                                                                   seat_users: SeatUsers) -> None:
    other = seat_users.make()
    for first, second, how in ((f"{base}/a", f"{base}/a", "is"), (f"{base}/a/b", f"{base}/a", "is inside"),
                               (f"{base}/a", f"{base}/a/b", "holds")):
        with pytest.raises(ConfigError, match=f"seat 'one': .* it {how} the home of seat 'two'"):
            load_config(config(base, seat("one", ":1", user=user.name, home=first)
                               + seat("two", ":2", user=other.name, home=second)), env={})
    # A template in another seat's home: that seat's user could change what this one resets to.
    with pytest.raises(ConfigError, match="it is inside the home of seat 'two'"):
        load_config(config(base, seat("one", ":1", user=user.name, home=f"{base}/a", home_template=f"{base}/b/t")
                           + seat("two", ":2", user=other.name, home=f"{base}/b")), env={})
    if os.geteuid() == 0:  # an existing home must be the seat's user's
        theirs = make_home(base, other, "theirs")
        with pytest.raises(ConfigError, match=f"it belongs to uid {other.uid}, not to the seat's user"):
            load_config(config(base, seat("one", ":1", user=user.name, home=str(theirs))), env={})
    # A symlink is what it points to.
    (base / "to_etc").symlink_to("/etc")
    with pytest.raises(ConfigError, match="'/etc' is a system directory"):
        load_config(config(base, seat("one", ":1", user=user.name, home=f"{base}/to_etc")), env={})


def _tree(base: Path, user: SeatUser, kind: str) -> str:
    """A template under ``base`` with one flaw (``kind``); its path."""
    template = base / f"tpl-{kind}"
    (template / "Desktop").mkdir(parents=True)
    (template / "Desktop" / "notes.txt").write_text("notes\n")
    if kind == "fifo":
        os.mkfifo(template / "Desktop" / "pipe")
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(template / "Desktop" / "sock"))
    elif kind == "device":  # /dev/null's numbers, made here: the reset would hand the user a device of its own
        os.mknod(template / "Desktop" / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    elif kind == "owned":
        os.chown(template, user.uid, user.gid)
    elif kind == "owned-file":
        os.chown(template / "Desktop" / "notes.txt", user.uid, user.gid)
    elif kind == "writable":
        (template / "Desktop").chmod(0o777)
    elif kind == "group-writable":
        (template / "Desktop" / "notes.txt").chmod(0o664)
    elif kind == "open-parent":  # the directory above it: anyone may rename the template and put another there
        inner = template / "inner"
        inner.mkdir()
        template.chmod(0o777)
        return str(inner)
    elif kind == "users-parent":
        inner = template / "inner"
        inner.mkdir()
        os.chown(template, user.uid, user.gid)
        return str(inner)
    elif kind == "file":
        return str(template / "Desktop" / "notes.txt")
    elif kind == "link-to-dev":  # a symlink is what it points to
        (base / "to-dev").symlink_to("/dev")
        return str(base / "to-dev")
    return str(template)


@pytest.mark.parametrize(("value", "words"), [
    ("/etc", "'/etc' is a system directory: the reset would hand its files to the seat's user"),
    ("/root", "'/root' is a system directory"),
    ("/dev", "'/dev' is a system directory"),
    ("/proc/1", "it is inside the system directory '/proc'"),
    ("/etc/ssh", "it is inside the system directory '/etc'"),
    ("{base}/state", "it is the daemon's state directory"),
    ("{base}", "it holds the daemon's state directory"),
    ("{base}/state/tpl", "it is inside the daemon's state directory"),
    ("{own_home}", "the daemon's own home"),
    ("tree:link-to-dev", "'/dev' is a system directory"),
    ("tree:fifo", "it holds 'Desktop/pipe', a FIFO: the reset would hand it to the seat's user"),
    ("tree:socket", "it holds 'Desktop/sock', a socket"),
    ("tree:device", "it holds 'Desktop/null', a character device"),
    ("tree:owned", "it belongs to uid {uid}: only uid 0 may own or write a template's files"),
    ("tree:owned-file", "'Desktop/notes.txt' in it belongs to uid {uid}"),
    ("tree:writable", "'Desktop' in it is writable by its group and others (mode 0777)"),
    ("tree:group-writable", "'Desktop/notes.txt' in it is writable by its group (mode 0664)"),
    ("tree:open-parent", "the directory '{base}/tpl-open-parent' above it can be written by everyone (mode 0777)"),
    ("tree:users-parent", "the directory '{base}/tpl-users-parent' above it can be written by seat 'one''s user, "
                          "who owns it, who could put another tree in its place"),
    ("tree:file", "it is not an existing directory"),
])
def test_a_template_a_reset_must_not_copy_is_refused_by_name(base: Path, user: SeatUser, value: str,
                                                             words: str) -> None:
    """Issue 41, item 5: the reset copies the template as root and gives the copy to the seat's user."""
    (base / "state").mkdir(exist_ok=True)
    own_home = pwd.getpwuid(os.geteuid()).pw_dir
    if value == "{own_home}" and PurePosixPath(own_home) in {PurePosixPath(d) for d in SYSTEM_DIRS}:
        words = "is a system directory"  # root's home is /root: refused for that first
    if value.startswith("tree:"):
        value = _tree(base, user, value.removeprefix("tree:"))
    fill = {"base": str(base), "own_home": own_home, "uid": str(user.uid)}
    value = value.format(**fill)
    with pytest.raises(ConfigError) as refused:
        load_config(config(base, seat("one", ":1", user=user.name, home=f"{base}/h", home_template=value)), env={})
    assert f"seat 'one': config key 'seats[0].home_template' = {value!r} is refused: " in refused.value.message
    assert words.format(**fill) in refused.value.message, refused.value.message
    assert refused.value.details["key"] == "seats[0].home_template"


def test_two_seats_of_one_user_are_refused_naming_both_and_the_user(base: Path, user: SeatUser) -> None:
    """Issue 41, item 5: a seat's reset ends every process of its user, the other seat's task with them."""
    with pytest.raises(ConfigError) as refused:
        load_config(config(base, seat("one", ":1", user=user.name, home=f"{base}/a")
                           + seat("two", ":2", user=user.uid, home=f"{base}/b")), env={})
    assert (f"seats 'one' and 'two' both run as user {user.name!r} (uid {user.uid}): a seat's reset ends every "
            "process of its user") in refused.value.message
    assert refused.value.details["key"] == "seats[1].user"


def _secret_place(base: Path, user: SeatUser, where: str) -> str:
    """A secret's path ``where`` (``{base}`` filled), made as the case says."""
    path = Path(where.format(base=base))
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.parent.name == "theirs":
        os.chown(path.parent, user.uid, user.gid)
    if path.parent.name == "sticky":
        path.parent.chmod(0o1777)
    if path.name != "not-yet":
        path.write_text("sk-secret\n")
        path.chmod(0o600)
    if path.name == "users":
        os.chown(path, user.uid, user.gid)
    if path.name == "group":
        os.chown(path, -1, user.gid)
        path.chmod(0o620)
    return str(path)


_SECRET_CASES = [
    ("{base}/h/key", "it is inside the home of seat 'one' ('{base}/h'), whose user could read or replace it"),
    ("{base}/h/.config/deep/key", "it is inside the home of seat 'one'"),
    ("{base}/tpl/key", "it is inside the template of seat 'one' ('{base}/tpl')"),
    ("{base}/theirs/key", "the directory '{base}/theirs' it is in can be written by seat 'one''s user, who owns it"),
    ("{base}/keys/users", "it can be written by seat 'one''s user, who owns it"),
    ("{base}/keys/group", "it can be written by seat 'one''s user, through its group"),
    ("{base}/sticky/key", "the directory '{base}/sticky' it is in can be written by everyone (mode 1777)"),
]


@pytest.mark.parametrize("key", ["api_key_file", "vnc_password_file", "notify[0].secret_file", "metrics.textfile"])
@pytest.mark.parametrize(("where", "words"), _SECRET_CASES)
def test_a_secret_a_seats_user_could_reach_is_refused_by_name(base: Path, user: SeatUser, key: str, where: str,
                                                              words: str) -> None:
    """Issue 41, item 5: a secret the daemon reads (a file it writes) where a seat's user can read or replace it."""
    (base / "tpl").mkdir(exist_ok=True)
    make_home(base, user, "h")
    path = _secret_place(base, user, where)
    table = seat("one", ":1" if key != "vnc_password_file" else None, user=user.name, home=f"{base}/h",
                 home_template=f"{base}/tpl")
    top = {"api_key_file": f'api_key_file = "{path}"\n', "metrics.textfile": f'[metrics]\ntextfile = "{path}"\n',
           "notify[0].secret_file": f'[[notify]]\ncommand = ["/bin/true"]\n[[notify]]\nwebhook = "http://127.0.0.1:9/x"\n'
                                    f'secret_header = "Authorization"\nsecret_file = "{path}"\n'}.get(key, "")
    if key == "vnc_password_file":
        table = table.replace('display = "None"', f'vnc = "127.0.0.1::5900"\nvnc_password_file = "{path}"')
    if key == "notify[0].secret_file":
        key = "notify[1].secret_file"
    with pytest.raises(ConfigError) as refused:
        load_config(config(base, top + table), env={})
    shown = f"seats[0].{key}" if key == "vnc_password_file" else key
    assert f"config key '{shown}' = {path!r} is refused: " in refused.value.message, refused.value.message
    assert words.format(base=base) in refused.value.message, refused.value.message


_COMPONENTS = st.sampled_from(["a", "b", "seat1", "..", ".", "state", "ü", "home", "x" * 40])
#: "{real}": a directory the test makes (root's, 0755), so that templates exist and some pass.
_ROOTS = st.sampled_from(sorted(SYSTEM_DIRS | {"/srv/seats", "/var/lib/cud-seats", "/tmp/cud-prop", "/opt/x",
                                               "{real}"}))


def _real_tree(base: Path) -> Path:
    """``base/real``: a/ and home/ fit for a template; b/ holds a FIFO, seat1/ is writable by all, state/ is a
    seat user's, ü/ holds a symlink to a character device (the symlink is fine, the device is not inside)."""
    real = base / "real"
    if real.exists():
        return real
    for name in ("a", "b", "seat1", "state", "ü", "home", "a/b", "x" * 40):
        (real / name).mkdir(parents=True, mode=0o755)
    (real / "a" / "notes.txt").write_text("notes\n")
    os.mkfifo(real / "b" / "pipe", 0o600)
    (real / "seat1").chmod(0o777)
    if os.geteuid() == 0:
        os.chown(real / "state", os.geteuid() + 4242, -1)
    (real / "ü" / "null").symlink_to("/dev/null")
    return real


def _tree_is_a_templates(root: str, seat_uids: set[int]) -> bool:
    """What a template must be, said again by hand: root's or the daemon's, written by nobody else, no device,
    socket or FIFO, and nothing above it that a seat's user could write (these seats' users have no groups)."""
    owners = {0, os.geteuid()}
    for parent in PurePosixPath(root).parents:
        info = os.lstat(parent)
        if info.st_uid in seat_uids or (info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX):
            return False
    for top, dirs, files in os.walk(root):
        for path in [top, *(os.path.join(top, n) for n in dirs + files)]:
            info = os.lstat(path)
            if info.st_uid not in owners:
                return False
            if not stat.S_ISLNK(info.st_mode) and (info.st_mode & 0o022 or not (
                    stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode))):
                return False
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(roots=st.lists(_ROOTS, min_size=1, max_size=3),
       tails=st.lists(st.lists(_COMPONENTS, max_size=4), min_size=3, max_size=3),
       state_root=_ROOTS, state_tail=st.lists(_COMPONENTS, max_size=3),
       templates=st.lists(st.none() | st.tuples(_ROOTS, st.lists(_COMPONENTS, max_size=3)), min_size=3, max_size=3))
@example(roots=["/tmp/cud-prop"], tails=[["state"], [], []], state_root="/tmp/cud-prop", state_tail=["state"],
         templates=[None] * 3)
@example(roots=["/tmp/cud-prop", "/tmp/cud-prop"], tails=[["a"], ["a", "b"], []], state_root="/opt/x",
         state_tail=[], templates=[None] * 3)
@example(roots=["/srv/seats"], tails=[["..", "..", "etc"], [], []], state_root="/opt/x", state_tail=[],
         templates=[None] * 3)
@example(roots=["/srv/seats"], tails=[[], [], []], state_root="/opt/x", state_tail=[],
         templates=[("{real}", ["a"]), None, None])
@example(roots=["/srv/seats"], tails=[[], [], []], state_root="{real}", state_tail=["a", "b"],
         templates=[("{real}", ["a"]), None, None])
@example(roots=["/srv/seats"], tails=[[], [], []], state_root="/opt/x", state_tail=[],
         templates=[("/etc", []), None, None])
@example(roots=["/srv/seats"], tails=[[], [], []], state_root="/opt/x", state_tail=[],
         templates=[("{real}", ["b"]), None, None])
@example(roots=["{real}", "/srv/seats"], tails=[["home"], [], []], state_root="/opt/x", state_tail=[],
         templates=[None, ("{real}", []), None])
def test_no_home_or_template_that_a_reset_must_not_touch_passes(
        base: Path, roots: list[str], tails: list[list[str]], state_root: str, state_tail: list[str],
        templates: list[tuple[str, list[str]] | None]) -> None:
    """Whatever homes and templates are configured, those that pass share nothing with the system, the daemon or
    each other, and a template that passes is a tree no seat's user can change, without devices, sockets or FIFOs."""
    fill = str(_real_tree(base))
    # A tail for each root; the rest are unused.
    homes = ["/".join([root, *tail]).replace("{real}", fill) for root, tail in zip(roots, tails, strict=False)]
    state = "/".join([state_root, *state_tail]).replace("{real}", fill)
    tpls = [None if t is None else "/".join([t[0], *t[1]]).replace("{real}", fill) for t in templates]
    daemon_home = "/home/cud-operator"
    places = [Place(f"s{i}", f"seats[{i}].", home, tpls[i], os.geteuid() + 4242 + i, f"u{i}")
              for i, home in enumerate(homes)]
    try:
        check_places(places, daemon_dirs={"the state directory": state}, daemon_home=daemon_home)
    except ConfigError as refused:
        assert refused.details["key"].endswith(("home", "home_template")), refused.details
        assert refused.details["seat"].startswith("s") and refused.details["value"] in refused.message
        return
    real = [os.path.realpath(h) for h in homes]
    real_state = os.path.realpath(state)
    for index, home in enumerate(real):
        assert home not in SYSTEM_DIRS
        assert not any(os.path.commonpath([home, tree]) == tree for tree in SYSTEM_TREES)
        assert os.path.commonpath([home, real_state]) not in (home, real_state)
        assert os.path.commonpath([home, daemon_home]) != home
        for other in real[index + 1:]:
            assert os.path.commonpath([home, other]) not in (home, other)
    for template in (os.path.realpath(t) for t in tpls[:len(homes)] if t is not None):
        assert template not in SYSTEM_DIRS
        assert not any(os.path.commonpath([template, tree]) == tree for tree in SYSTEM_TREES)
        assert os.path.commonpath([template, real_state]) not in (template, real_state)
        assert os.path.commonpath([template, daemon_home]) != template
        for home in real:
            assert os.path.commonpath([template, home]) not in (template, home)
        assert os.path.isdir(template) and _tree_is_a_templates(template, {p.uid for p in places})


_UNIT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.\\-"
_UNIT_PART = st.text(alphabet=_UNIT_CHARS, min_size=1, max_size=40)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.builds(lambda a, b: f"{a}@{b}.service", _UNIT_PART, _UNIT_PART),
                      st.builds(lambda a: f"{a}.service", _UNIT_PART), st.text(max_size=60)))
@example(name="cud-session@1.service")
@example(name="cud-session@.service")
@example(name="cud session@1.service")
@example(name="cud-session@1.service\n")
@example(name="@1.service")
@example(name="cud-session@1@2.service")
def test_session_unit_names_are_systemds_service_names(base: Path, user: SeatUser, name: str) -> None:
    head, _at, instance = name.removesuffix(".service").partition("@")
    valid = (name.endswith(".service") and len(name) <= 255 and bool(head) and (not _at or bool(instance))
             and all(c in _UNIT_CHARS for c in head + instance))
    # The seat tables as TOML gives them (any string: TOML's own escaping is not what is tested).
    table = {"seats": [{"name": "one", "display": ":1", "user": user.name, "home": str(base / "h"),
                        "session_unit": name}]}
    if valid:
        assert load_seats(table, {}, {})[0].session_unit == name
    else:
        with pytest.raises(ConfigError) as refused:
            load_seats(table, {}, {})
        assert "'seats[0].session_unit' must be a systemd service unit's name" in refused.value.message \
            or "'seats[0].session_unit' must be a non-empty string" in refused.value.message


def _home_under(base: Path, user: SeatUser, other: SeatUser, kind: str) -> str:
    """A home (not made yet) below a directory under ``base`` with one flaw (``kind``); its path."""
    if kind == "in-tmp":  # straight in /tmp: sticky, but the home is its user's to rename, links and all
        return f"/tmp/cud-home-{os.getpid()}-{kind}"
    parent = base / f"hp-{kind}"
    parent.mkdir(mode=0o755)
    parent.chmod({"open": 0o777, "sticky": 0o1777, "group": 0o775}.get(kind, 0o755))
    if kind == "group":
        os.chown(parent, 0, user.gid)
    elif kind in ("users", "users-above", "link"):
        os.chown(parent, user.uid, user.gid)
    elif kind == "other-seats":
        os.chown(parent, other.uid, other.gid)
    if kind == "users-above":  # a directory of root's, in one of the user's: the user renames it and all below
        (parent / "x").mkdir(mode=0o755)
        return str(parent / "x" / "h")
    if kind == "link":  # a symlink is what it points to
        (base / "to-hp-link").symlink_to(parent)
        return str(base / "to-hp-link" / "h")
    return str(parent / "h")


@pytest.mark.parametrize(("kind", "where", "words"), [
    ("open", "{base}/hp-open", "everyone (mode 0777), seats' users too"),
    ("sticky", "{base}/hp-sticky", "everyone (mode 1777), seats' users too"),
    ("in-tmp", "/tmp", "everyone (mode 1777), seats' users too"),
    ("group", "{base}/hp-group", "seat 'one''s user, through its group (gid {gid})"),
    ("users", "{base}/hp-users", "seat 'one''s user, who owns it"),
    ("users-above", "{base}/hp-users-above", "seat 'one''s user, who owns it"),
    ("other-seats", "{base}/hp-other-seats", "seat 'two''s user, who owns it"),
    ("link", "{base}/hp-link", "seat 'one''s user, who owns it"),
])
def test_a_home_below_a_directory_a_seats_user_can_write_is_refused_by_name(
        base: Path, user: SeatUser, seat_users: SeatUsers, kind: str, where: str, words: str) -> None:
    """Review of issue 41, (10): whoever can write a directory above the home can put a symlink or another
    directory in the home's place, and move where root's reset and file access go. Any seat's user counts;
    sticky is no help for the home's own directory (the home is its user's: it may rename it)."""
    other = seat_users.make()
    home = _home_under(base, user, other, kind)
    fill = {"base": str(base), "gid": str(user.gid)}
    with pytest.raises(ConfigError) as refused:
        load_config(config(base, seat("one", ":1", user=user.name, home=home)
                           + seat("two", ":2", user=other.name, home=f"{base}/two")), env={})
    assert (f"seat 'one': config key 'seats[0].home' = {home!r} is refused: the directory "
            f"{where.format(**fill)!r} above it can be written by {words.format(**fill)}, who could put a symlink "
            "or another directory in the home's place") in refused.value.message, refused.value.message
    assert refused.value.details["key"] == "seats[0].home"


def test_a_home_below_root_directories_and_a_sticky_one_further_up_loads(base: Path, user: SeatUser) -> None:
    """The parent rule's other side: root's 0755 directories (the tests' homes live so), and a sticky directory
    above the home's own (as /tmp above them: nobody renames root's entry in it)."""
    (base / "sticky").mkdir(mode=0o755)
    (base / "sticky").chmod(0o1777)
    (base / "sticky" / "x").mkdir(mode=0o755)
    for home in (f"{base}/h", f"{base}/sticky/x/h"):
        loaded = load_config(config(base, seat("one", ":1", user=user.name, home=home)), env={})
        assert loaded.seats[0].home == Path(home)


def test_a_seat_of_its_own_with_a_session_unit_is_systemds_and_needs_no_root(base: Path, user: SeatUser,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``session_unit`` the three keys are the command units' settings (docs/sessions.md, "Under systemd"):
    accepted from a daemon that is not root (here the seat's user itself, as the shipped cud.service runs seats of
    its own user); without it such a daemon refuses them."""
    seat = {"name": "one", "display": ":1", "user": user.name, "home": str(base / "h"), "private_tmp": True,
            "home_path": "/home/user", "network": "none"}
    monkeypatch.setattr(os, "geteuid", lambda: user.uid)
    (loaded,) = load_seats({"seats": [{**seat, "session_unit": "cud-session@1.service"}]}, {}, {})
    assert (loaded.session_unit, loaded.isolation) == ("cud-session@1.service", Isolation(True, "/home/user", "none"))
    with pytest.raises(ConfigError, match=r"'seats\[0\]\.private_tmp' = True needs a daemon run as root"):
        load_seats({"seats": [seat]}, {}, {})


_NETWORKS = st.one_of(st.ip_addresses(v=4).flatmap(lambda a: st.integers(0, 32).map(lambda n: (a, n))),
                      st.ip_addresses(v=6).flatmap(lambda a: st.integers(0, 128).map(lambda n: (a, n))))


@settings(max_examples=300, deadline=None)
@given(where=_NETWORKS, port=st.none() | st.integers(1, 65535), bare=st.booleans())
def test_an_allow_list_entry_means_what_ipaddress_says_and_reads_back(where: tuple[object, int],
                                                                       port: int | None, bare: bool) -> None:
    """Differential against Python's ipaddress: any network (host bits cleared), any port or none, an address
    written bare or with its prefix; words() reads back as the same entry."""
    address, prefix = where
    network = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    text = str(network.network_address) if bare and network.prefixlen == network.max_prefixlen \
        else network.with_prefixlen
    if port is not None:
        text = f"[{text}]:{port}" if network.version == 6 else f"{text}:{port}"
    entry = parse_allowed("seats[0].network[0]", text)
    assert (entry.network, entry.port) == (network, port)
    assert parse_allowed("k", entry.words()) == entry


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("0123456789abcdef.:/[]x -"), max_size=40))
def test_any_text_is_an_allow_list_entry_or_refused_naming_the_key_and_the_value(text: str) -> None:
    try:
        entry = parse_allowed("seats[3].network[7]", text)
    except ConfigError as exc:
        assert "'seats[3].network[7]'" in str(exc) and repr(text) in str(exc)
    else:
        assert entry.port is None or 0 < entry.port < 65536


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=30), st.text(max_size=12).map(lambda t: "/home/" + t)))
def test_a_home_path_is_a_directory_directly_in_home_or_refused_naming_seat_key_and_value(text: str) -> None:
    seats = [{"name": "s1", "display": ":9", "user": "nobody", "home": "/var/lib/cud-seats/s1", "home_path": text}]
    try:
        (loaded,) = load_seats({"seats": seats}, {}, {})
    except ConfigError as exc:
        assert "'seats[0].home_path'" in str(exc) and repr(text) in str(exc)
    else:
        name = text.removeprefix("/home/")
        assert loaded.isolation.home_path == text and text.startswith("/home/") and name not in ("", ".", "..")
        assert "/" not in name
