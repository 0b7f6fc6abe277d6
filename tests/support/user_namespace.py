"""Run a command as another user in a mount namespace where it can reach this Python and this checkout.

``unshare --mount --propagation private python -m tests.support.user_namespace --uid U --gid G
--staging DIR -- CMD...``: as root, in the new mount namespace, every directory the command needs
(the interpreter's prefix, the virtualenv, the checkout) is made reachable; then root is dropped for
``U``/``G`` and ``CMD`` is executed.

Why: the test machine's interpreter lives under /root (pyenv), which is mode 0700, and CI may clone
under it too. A fleet node run as an unprivileged user (the rights test) must start that same Python
with that same Ray. Changing /root's mode would open it to every user of the machine; instead, only in
this namespace, each closed ancestor is covered by a tmpfs (mode 0755) holding bind mounts of exactly
the needed directories, so nothing else under it is visible and nothing outside the namespace changes.
"""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.support.daemon import ROOT

__all__ = ("needed_paths",)


def needed_paths() -> list[Path]:
    """What a child Python of this one needs: its prefixes and the checkout, without any inside another."""
    paths = sorted({Path(p).resolve() for p in (sys.base_prefix, sys.prefix, ROOT)})
    return [p for p in paths if not any(q != p and q in p.parents for q in paths)]


def _closed_top(path: Path) -> Path | None:
    """The highest ancestor of ``path`` that other users may not enter (no o+x), if any."""
    for parent in reversed(path.parents):
        if parent != Path("/") and not parent.stat().st_mode & stat.S_IXOTH:
            return parent
    return None


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def open_up(paths: list[Path], staging: Path) -> None:
    """Make each of ``paths`` reachable through its closed ancestors (this mount namespace only)."""
    by_top: dict[Path, list[Path]] = {}
    for path in paths:
        top = _closed_top(path)
        if top is not None:
            by_top.setdefault(top, []).append(path)
    for n, (top, inside) in enumerate(by_top.items()):
        points = []
        for i, path in enumerate(inside):  # held aside first: the tmpfs over ``top`` hides them
            point = staging / f"{n}-{i}"
            point.mkdir()
            _mount("--bind", str(path), str(point))
            points.append(point)
        _mount("-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(top))
        for path, point in zip(inside, points, strict=True):
            target = top / path.relative_to(top)
            target.mkdir(parents=True, exist_ok=True)
            _mount("--move", str(point), str(target))
            point.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.user_namespace")
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--gid", type=int, required=True)
    parser.add_argument("--staging", type=Path, required=True, help="an empty directory for the bind mounts in transit")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    os.umask(0o022)
    open_up(needed_paths(), args.staging)
    os.setgroups([args.gid])
    os.setgid(args.gid)
    os.setuid(args.uid)
    os.execvp(args.command[0], args.command)


if __name__ == "__main__":
    main()
