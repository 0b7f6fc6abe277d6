"""A seat with a session for the spec tests: openbox on Xvfb, buses root and the seat's user share, a user,
a home and its template, and a real daemon whose scripted model plays one scenario for every task.

Everything is started here and stopped by pid (the seat's user and what it ran go with the
``seat_users`` fixture at the end of the session); the spec files a test writes go in ``specs``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cud.daemon.session.user import SeatUser
from cud.scripted import ScriptedModel

from .a11y import A11yBus, start_shared_a11y_bus
from .daemon import Daemon, cuctl
from .desktop import Desktop, start_desktop
from .seat_users import SeatUsers, make_home

__all__ = ("SEAT", "SpecSeat", "spec_seat")

SEAT = "s1"


@dataclass
class SpecSeat:
    desktop: Desktop
    bus: A11yBus
    user: SeatUser
    home: Path
    template: Path
    daemon: Daemon
    model: ScriptedModel
    specs: Path  # where spec files and their fixtures are written (the submitter's side)

    def write(self, name: str, text: str, files: dict[str, bytes | str] | None = None) -> Path:
        """A spec file ``name`` with ``text`` and the files it names (relative to its folder)."""
        for relative, data in (files or {}).items():
            path = self.specs / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.encode() if isinstance(data, str) else data)
        spec = self.specs / name
        spec.write_text(text)
        return spec

    def submit(self, spec: Path, *args: str) -> tuple[int, dict[str, Any]]:
        """``cuctl submit --spec`` with ``--wait --json``: its exit status and the task as it ended."""
        done = cuctl(self.daemon.socket, "submit", "--spec", str(spec), "--wait", "--json", *args, timeout=300)
        assert done.stdout.strip(), f"cuctl submit printed nothing; stderr: {done.stderr}"
        return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])

    def events(self, task_id: int) -> list[dict[str, Any]]:
        return self.daemon.events(task_id)


@contextlib.contextmanager
def spec_seat(seat_users: SeatUsers, scenario: dict[str, Any], *, config: str = "",
              template_files: dict[str, str] | None = None, seats: int = 1,
              scenarios: dict[str, dict[str, Any]] | None = None, python: str | None = None,
              seat_config: str = "", extra_env: dict[str, str] | None = None) -> Iterator[SpecSeat]:
    """``seats`` seats s1, s2, … (each its own display, user, home and template; the fields are the first's) in
    one daemon; ``scenarios`` are what models named ``scripted:NAME`` play (``ScriptedModel(scenarios=…)``);
    ``python`` is the daemon's interpreter (default: the tests'); ``seat_config``: more keys of every
    ``[[seats]]`` table (``network = "none"\n``); ``extra_env`` is added to the daemon's environment."""
    workdir = Path(tempfile.mkdtemp(prefix="cud-spec-", dir="/tmp"))
    workdir.chmod(0o755)  # the seat's user reaches its home and template through it
    users: list[str] = []
    try:
        with contextlib.ExitStack() as stack:
            made = []
            for number in range(1, seats + 1):
                user = seat_users.make()
                users.append(user.name)
                place = workdir / f"seat{number}"
                place.mkdir(mode=0o755)
                desktop = stack.enter_context(start_desktop("x11", place))
                bus = start_shared_a11y_bus(desktop, [user.name])
                stack.callback(bus.stop)
                home = make_home(place, user)
                template = place / "template"  # ours (root's): a seat's user may not change its template
                template.mkdir(mode=0o755)
                for relative, text in (template_files or {}).items():
                    path = template / relative
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
                made.append((desktop, bus, user, home, template))
            specs = workdir / "specs"
            specs.mkdir()
            model = ScriptedModel(scenario, scenarios=scenarios, record=seats == 1)
            url = model.start()
            stack.callback(model.stop)
            seat_tables = "".join(
                f'[[seats]]\nname = "s{n}"\ndisplay = "{d.display}"\nsession_bus = "{b.address}"\n'
                f'user = "{u.name}"\nhome = "{h}"\nhome_template = "{t}"\n{seat_config}'
                for n, (d, b, u, h, t) in enumerate(made, start=1))
            # The test's own keys first: a top-level key after [[seats]] would be the seat's.
            daemon = Daemon(made[0][0].display, url, config=config + "\n" + seat_tables, seats={}, python=python,
                            extra_env=extra_env)
            stack.callback(daemon.cleanup)
            daemon.start()
            desktop, bus, user, home, template = made[0]
            yield SpecSeat(desktop, bus, user, home, template, daemon, model, specs)
    finally:
        # What setup and the model started as the seats' users (an editor saving its config on the way out)
        # would write into their homes while they are removed.
        for name in users:
            seat_users.end_processes(name)
        shutil.rmtree(workdir, ignore_errors=True)
