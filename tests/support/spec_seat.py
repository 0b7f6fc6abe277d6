"""A seat with a session for the spec tests: openbox on Xvfb, buses root and the seat's user share, a user,
a home and its template, and a real daemon whose scripted model plays one scenario for every task.

Everything is started here and stopped by pid (the seat's user and what it ran go with the
``seat_users`` fixture at the end of the session); the spec files a test writes go in ``specs``.
"""

from __future__ import annotations

import contextlib
import json
import os
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
              template_files: dict[str, str] | None = None) -> Iterator[SpecSeat]:
    workdir = Path(tempfile.mkdtemp(prefix="cud-spec-", dir="/tmp"))
    workdir.chmod(0o755)  # the seat's user reaches its home and template through it
    user = seat_users.make()
    try:
        with start_desktop("x11", workdir) as desktop:
            bus = start_shared_a11y_bus(desktop, [user.name])
            model: ScriptedModel | None = None
            daemon: Daemon | None = None
            try:
                home = make_home(workdir, user)
                template = make_home(workdir, user, "template")
                for relative, text in (template_files or {}).items():
                    path = template / relative
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
                if os.geteuid() == 0:
                    for path in [template, *template.rglob("*")]:
                        os.chown(path, user.uid, user.gid)
                specs = workdir / "specs"
                specs.mkdir()
                model = ScriptedModel(scenario)
                seat = (f'[[seats]]\nname = "{SEAT}"\ndisplay = "{desktop.display}"\nsession_bus = "{bus.address}"\n'
                        f'user = "{user.name}"\nhome = "{home}"\nhome_template = "{template}"\n')
                # The test's own keys first: a top-level key after [[seats]] would be the seat's.
                daemon = Daemon(desktop.display, model.start(), config=config + "\n" + seat, seats={}).start()
                yield SpecSeat(desktop, bus, user, home, template, daemon, model, specs)
            finally:
                if daemon is not None:
                    daemon.cleanup()
                if model is not None:
                    model.stop()
                bus.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
