"""Issue 38's renames (one word, one meaning), as a script that can be run again.

Run it from the repository's root (``python tools/renames.py``; ``--check`` lists what it
would still change and changes nothing). It is idempotent: a second run changes nothing. The
lead re-applies it to code merged from other branches, so every rename is a pattern, never a
line number. ``tests/test_glossary.py`` reads :data:`RETIRED` (the code names that must be
gone) from here. Config keys and protocol fields are not renamed here: docs/layout.md's
glossary says which ones keep an old spelling.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Every file a rename may touch: the code, the tests, the tools and the docs. CHANGELOG.md is
#: left out on purpose (its old entries name the old names; that is history).
PY = ("cud/**/*.py", "daemon/**/*.py", "drivers/**/*.py", "tests/**/*.py", "bench/**/*.py", "sandbox/**/*.py",
      "examples/**/*.py")
DOCS = ("docs/*.md", "README.md")
ALL = PY + DOCS
#: A line with this in it names an old name on purpose (docs/layout.md's glossary): it is left alone.
KEEP = "renamed from"


@dataclasses.dataclass(frozen=True)
class Rename:
    """One rename: a regular expression, its replacement, and the files (globs) it applies to."""

    old: str
    new: str | Callable[[re.Match[str]], str]
    paths: tuple[str, ...]
    #: The word of the glossary this rename gives one meaning to.
    word: str


#: Modules moved (``git mv``): the old path, the new one. Applied before the renames.
MOVES: tuple[tuple[str, str], ...] = (
    # "guard" is the stuck guard ([guard]); what a task may still spend is measured by a meter.
    ("daemon/budget/guard.py", "daemon/budget/meter.py"),
    # "model" is the model API's model; a record read back is what this module holds.
    ("cud/record/model.py", "cud/record/reading.py"),
)

#: The code names that no longer exist, as ``module:Name`` (or ``module:Class.attribute``);
#: tests/test_glossary.py checks that each is gone and that the code names none of them.
RETIRED: tuple[str, ...] = (
    "cud.daemon.server.access:Policy",
    "cud.daemon.targets.rules:Verdict",
    "cud.daemon.targets.gate:TargetGate.verdict",
    "cud.views:ApprovalPolicy",
    "cud.views:APPROVAL_POLICIES",
    "cud.views:POLICY_STRICTNESS",
    "cud.daemon.store.trajectory:StepRecord",
    "cud.daemon.budget.guard:BudgetGuard",
    "cud.record.model:Record",
    "cud.daemon.service:Daemon.dispatch",
    "cud.daemon.server.unix_socket:Dispatch",
    "cud.daemon.seats.seat:Seat.check",
    "cud.daemon.targets.gate:TargetGate.check",
    "cud.daemon.seats.seat:Seat.spec",
    "cud.daemon.tasks.runner:TaskRun.policy",
    "cud.drivers.png:PngSettings.guard",
    "cud.drivers.png:GUARD_SHIFT",
)

_SERVER = ("daemon/server/**/*.py", "daemon/service.py")

RENAMES: tuple[Rename, ...] = (
    # -- approval: the setting (`approval`, "safety" | "actions") is the approval *mode* ---------------
    Rename(r"\bApprovalPolicy\b", "ApprovalMode", ALL, "approval mode"),
    Rename(r"\bAPPROVAL_POLICIES\b", "APPROVAL_MODES", ALL, "approval mode"),
    Rename(r"\b([Aa])pproval polic(y|ies)\b", lambda m: f"{m[1]}pproval mode{'s' if m[2] == 'ies' else ''}",
           ALL, "approval mode"),
    Rename(r"\bPOLICY_STRICTNESS\b", "APPROVAL_MODE_STRICTNESS", ALL, "approval mode"),
    Rename(r"#: Stricter policies come later", "#: Stricter modes come later", ("cud/**/*.py",), "approval mode"),
    Rename(r"the (``|`)actions\1 policy\b", r"the \1actions\1 approval mode", ALL, "approval mode"),
    Rename(r"A submitter may make the policy stricter, never looser",
           "A submitter may make the approval mode stricter, never looser", DOCS, "approval mode"),
    Rename(r"the approval\npolicy decides as before", "the approval\nmode decides as before", DOCS, "approval mode"),
    Rename(r"\bself\.policy\b", "self.approval_mode", ("daemon/tasks/**/*.py",), "approval mode"),
    # -- policy: only `[policy]` (its rules); who may do what is the daemon's access rights ---------
    Rename(r"(?<![-\w])(?<!Security )Policy\b(?! [Rr]ules)", "AccessRights", ALL, "access rights"),
    Rename(r"\.policy\b", ".access_rights", (*_SERVER, "tests/**/*.py"), "access rights"),
    Rename(r"\bpolicy\b(?= =|,|\.| = | policy|: AccessRights)", "rights", ("daemon/server/handlers/*.py",),
           "access rights"),
    Rename(r"\bpolicy: AccessRights\b", "access_rights: AccessRights", ("daemon/server/unix_socket.py",),
           "access rights"),
    Rename(r"\bself\.access_rights = policy\b", "self.access_rights = access_rights", ("daemon/server/unix_socket.py",),
           "access rights"),
    Rename(r"\bpolicy = AccessRights\(", "rights = AccessRights(", ("tests/**/*.py",), "access rights"),
    Rename(r"\bpolicy\.(may_|require_|task_for|event_for)", r"rights.\1", ("tests/test_spec_submit.py",),
           "access rights"),
    Rename(r"the access\n  policy lets it submit", "its access\n  rights let it submit",
           ("daemon/server/unix_socket.py",), "access rights"),
    # -- verdict: only a spec's task verdict ("passed" | "failed"); a rule gives a decision ---------
    Rename(r"\bVerdict\b(?!View)", "RuleDecision", ("daemon/targets/*.py", "tests/test_rules.py",
                                                   "tests/test_targets*.py"), "rule decision"),
    Rename(r"\bdef verdict\(self, action", "def rule_decision(self, action", ("daemon/targets/gate.py",),
           "rule decision"),
    Rename(r"\bverdict\b(?! applies)", "rule_decision", ("daemon/targets/gate.py",), "rule decision"),
    Rename(r"``verdict`` applies", "``rule_decision`` applies", ("daemon/targets/gate.py",), "rule decision"),
    Rename(r"\bverdict = self\.gate\.verdict\(", "rule_decision = self.gate.rule_decision(", ("daemon/tasks/**/*.py",),
           "rule decision"),
    Rename(r"\bverdict(\.decision|\.as_check\(\)| is not None)", r"rule_decision\1", ("daemon/tasks/**/*.py",),
           "rule decision"),
    Rename(r"\.gate\.verdict\(", ".gate.rule_decision(", ("tests/**/*.py",), "rule decision"),
    # -- spec: only a task spec; a seat's `[[seats]]` entry is its seat_config ----------------------
    Rename(r"\bself\.spec\b", "self.seat_config", ("daemon/seats/seat.py",), "seat config"),
    Rename(r"(?<![\w.\"'])spec\b(?![\"'])", "seat_config", ("daemon/seats/seat.py",), "seat config"),
    Rename(r"(?<![\w.\"'])spec\b(?![\"'])", "seat_config", ("daemon/seats/dispatch.py",), "seat config"),
    Rename(r"\bseat\.spec\b(?!s)", "seat.seat_config", ("daemon/**/*.py", "tests/**/*.py"), "seat config"),
    # -- model: only the model API's model; a record read back is cud.record.reading --------------
    Rename(r"\bcud\.record\.model\b", "cud.record.reading", ALL, "record"),
    Rename(r"\bcud/record/model\.py\b", "cud/record/reading.py", ALL, "record"),
    # -- guard: only the stuck guard ([guard]); what a task may spend is the budget meter ------------
    Rename(r"\bcud\.daemon\.budget\.guard\b", "cud.daemon.budget.meter", ALL, "budget meter"),
    Rename(r"\bdaemon/budget/guard\.py\b", "daemon/budget/meter.py", ALL, "budget meter"),
    Rename(r"\(`guard\.py`\)", "(`meter.py`)", DOCS, "budget meter"),
    Rename(r"the line a running task meets \(guard\.py\)", "the line a running task meets (meter.py)",
           ("daemon/budget/__init__.py",), "budget meter"),
    Rename(r"\bBudgetGuard\b", "BudgetMeter", ALL, "budget meter"),
    Rename(r"\bbudget guard\b", "budget meter", ALL, "budget meter"),
    Rename(r"\bguard=(True|False)\b", r"pillow_floor=\1",
           ("drivers/png.py", "bench/**/*.py", "tests/**/*.py", "docs/*.md"), "guard"),
    Rename(r"\bsettings\.guard\b", "settings.pillow_floor", ("drivers/png.py",), "guard"),
    Rename(r"^    guard: bool = True", "    pillow_floor: bool = True", ("drivers/png.py",), "guard"),
    Rename(r"\bGUARD_SHIFT\b", "PILLOW_FLOOR_SHIFT", ("drivers/**/*.py", "tests/**/*.py", "bench/**/*.py"), "guard"),
    Rename(r"The check \(``guard``\)", "The check (``pillow_floor``)", ("drivers/png.py",), "guard"),
    Rename(r"the console's guards \(token", "the console's defences (token", DOCS, "guard"),
    # -- dispatch: only which seat runs which task; the socket hands a request to its handler -------
    Rename(r"\bDispatch\b", "RequestHandler", ("daemon/server/unix_socket.py",), "request handler"),
    Rename(r"\bdispatch: RequestHandler\b", "handle_request: RequestHandler", ("daemon/server/unix_socket.py",),
           "request handler"),
    Rename(r"\bself\.dispatch = dispatch\b", "self.handle_request = handle_request", ("daemon/server/unix_socket.py",),
           "request handler"),
    Rename(r"\bself\.dispatch\(peer", "self.handle_request(peer", ("daemon/server/unix_socket.py",), "request handler"),
    Rename(r"read framed requests, dispatch, reply", "read framed requests, hand each to its handler, reply",
           ("daemon/server/unix_socket.py",), "request handler"),
    Rename(r"\bself\.dispatch,", "self.handle_request,", ("daemon/service.py",), "request handler"),
    Rename(r"\basync def dispatch\(", "async def handle_request(", ("daemon/service.py",), "request handler"),
    # -- check: a spec's check; a seat's own test is its health check; the gate's is the binding's --
    Rename(r"\basync def check\(self\) -> bool", "async def health_check(self) -> bool", ("daemon/seats/seat.py",),
           "health check"),
    Rename(r"\bself\.check\(\)", "self.health_check()", ("daemon/seats/seat.py",), "health check"),
    Rename(r"\bseat\.check\(\)", "seat.health_check()", ("daemon/**/*.py", "tests/**/*.py"), "health check"),
    Rename(r"\bdef check\(self, action", "def check_binding(self, action", ("daemon/targets/gate.py",),
           "approval binding"),
    Rename(r"\.gate\.check\(", ".gate.check_binding(", ("daemon/tasks/**/*.py", "tests/**/*.py"), "approval binding"),
    # -- record: everything kept of one task; a step's timings are not "a record" ------------------
    Rename(r"\bStepRecord\b", "StepTimings", ALL, "record"),
    # -- the lines these renames made too long, and imports put back in order --------------------
    Rename(r"session_for\(seat_config\.name, seat_config\.user, seat_config\.home, seat_config\.home_template,\n"
           r" +seat_config\.target_display, seat_config\.session_bus,\n +seat_config\.session_unit\)",
           "session_for(\n"
           "            seat_config.name, seat_config.user, seat_config.home, seat_config.home_template,\n"
           "            seat_config.target_display, seat_config.session_bus, seat_config.session_unit)",
           ("daemon/seats/seat.py",), "seat config"),
    Rename(r"for_seat\(seat_config\.target_display, seat_config\.session_bus, vnc=seat_config\.vnc is not None,\n",
           "for_seat(seat_config.target_display, seat_config.session_bus,\n"
           "                                               vnc=seat_config.vnc is not None,\n",
           ("daemon/seats/seat.py",), "seat config"),
    Rename(r"asks = rule_decision\.decision == \"ask\" if rule_decision is not None else self\.approval_mode == "
           r"\"actions\" and kind not in _HARMLESS",
           "asks = (rule_decision.decision == \"ask\" if rule_decision is not None\n"
           "                else self.approval_mode == \"actions\" and kind not in _HARMLESS)",
           ("daemon/tasks/**/*.py",), "rule decision"),
    Rename(r"(?<=%dx%d\", )self\.name, self\.seat_config\.where, again, \*self\.size\)  # type",
           "self.name, self.seat_config.where, again,\n                     *self.size)  # type",
           ("daemon/seats/seat.py",), "seat config"),
    Rename(r"(``AccessRights\.task_for``/``event_for``: why a step failed is withheld from a reader without the right "
           r"unless) only\n    the display", r"\1\n    only the display", ("tests/test_spec_submit.py",),
           "access rights"),
    Rename(r"import Peer, AccessRights\b", "import AccessRights, Peer", ALL, "access rights"),
    Rename(r"\bWITHHELD_SETUP, Peer, AccessRights\b", "WITHHELD_SETUP, AccessRights, Peer", ALL, "access rights"),
)


def _files(globs: tuple[str, ...]) -> list[Path]:
    seen: dict[Path, None] = {}
    for pattern in globs:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and ".venv" not in path.parts and path != Path(__file__).resolve():
                seen[path] = None
    return list(seen)


def move(check: bool) -> list[str]:
    done = []
    for old, new in MOVES:
        if (ROOT / old).exists() and not (ROOT / new).exists():
            done.append(f"{old} -> {new}")
            if not check:
                subprocess.run(["git", "mv", old, new], cwd=ROOT, check=True)
    return done


def rename(check: bool) -> dict[str, int]:
    """Apply every rename; returns, per file, how many replacements it got."""
    counts: dict[str, int] = {}
    for item in RENAMES:
        pattern = re.compile(item.old, re.M)
        for path in _files(item.paths):
            text = path.read_text()
            # A line that says what a name was ("renamed from …", the glossary's) keeps the old name.
            kept = [line for line in text.splitlines(keepends=True) if KEEP in line]
            for i, line in enumerate(kept):
                text = text.replace(line, f"\0{i}\0", 1)
            new, n = pattern.subn(item.new, text)
            for i, line in enumerate(kept):
                new = new.replace(f"\0{i}\0", line, 1)
            if n:
                counts[str(path.relative_to(ROOT))] = counts.get(str(path.relative_to(ROOT)), 0) + n
                if not check:
                    path.write_text(new)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list what would change; change nothing")
    args = parser.parse_args(argv)
    moved = move(args.check)
    counts = rename(args.check)
    for line in moved:
        print("move", line)
    for path, n in sorted(counts.items()):
        print(f"{n:4d}  {path}")
    return 1 if args.check and (moved or counts) else 0


if __name__ == "__main__":
    sys.exit(main())
