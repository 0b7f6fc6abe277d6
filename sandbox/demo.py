"""``make demo``: one desktop task through the whole of cud, in the sandbox.

It submits a task with ``cuctl submit --json``, shows the task's events live
(``cuctl follow``), approves the approval the model asks for, as a human
would with ``cuctl approve ID``, and prints the result, what the demo app
received and where the task's record is. Exit code 0 only if the task
succeeded (and, with the scripted model, the demo app received the exact text).

Without OPENAI_API_KEY the sandbox's daemon talks to the bundled scripted
model; that is said plainly, before and after.

With ``MODEL=claude`` (given to sandbox-up, which ``make demo MODEL=claude``
runs first) the task names the daemon's ``[models.claude]`` entry: Anthropic's
Messages API with ANTHROPIC_API_KEY, else the scripted Messages server. That API
sends no safety checks, so the task is submitted with approval ``actions`` and
the demo approves each action; the example suite, whose scripted models speak
the Responses API, is left to ``make demo`` without MODEL.

With several seats (``SEATS=N``) the task is pinned to the first seat
(``cuctl submit --seat seat1``): the one the summary lists first, whose
viewer a person watching the demo has open, and whose demo app the result
is checked against. The other seats stay free for tasks of one's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from parts import CLAUDE_ENTRY, KEY_ENV, Settings
from procs import SandboxError, load, state_of

from cud.daemon.config import DEFAULT_MODEL

__all__ = ()

ROOT = Path(__file__).resolve().parent.parent
TEXT = "Hello from cud — ✓ ü €"
PROMPT = (
    f"In the window titled 'cud demo', click the blue text field, type exactly: {TEXT} "
    "and press Enter. Then stop and say what the window lists under 'Received:'."
)


def say(text: str) -> None:
    print(f"demo: {text}", flush=True)


def _show(path: Path) -> str:
    return os.path.relpath(path) if path.resolve().is_relative_to(Path.cwd()) else str(path)


class Cuctl:
    def __init__(self, settings: Settings) -> None:
        self.argv = [str(settings.venv / "bin" / "cuctl"), "--socket", str(settings.socket)]
        #: How a person would type it, for the messages.
        self.shown = f"{_show(settings.venv / 'bin' / 'cuctl')} --socket {_show(settings.socket)}"

    def json(self, *args: str) -> Any:
        result = subprocess.run([*self.argv, *args, "--json"], capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise SandboxError(f"cuctl {' '.join(args)} failed: {result.stderr.strip()}")
        return json.loads(result.stdout)


def received(settings: Settings, prefix: str = "") -> list[str]:
    """What the demo app of one seat (``prefix``: its records' prefix, "" for a lone seat) received, in order."""
    lines = []
    try:
        raw = settings.path(f"{prefix}demo-app.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return lines
    for line in raw:
        record = json.loads(line)
        if record.get("event") == "received":
            lines.append(record["text"])
    return lines


def run(settings: Settings) -> int:
    daemon = load(settings.dir / "run", "daemon")
    if daemon is None or state_of(daemon) != "running":
        raise SandboxError("the sandbox's daemon does not run: `make sandbox-up` first (make demo does it)")
    scripted = daemon.info.get("model") == "scripted"
    claude = daemon.info.get("api") == "messages"
    key = KEY_ENV["messages" if claude else "responses"]
    if scripted and claude:
        say("MODEL=claude and ANTHROPIC_API_KEY is not set: the model is SCRIPTED. A bundled scenario plays "
            "Claude's part over the real anthropic SDK and Anthropic's Messages API (screenshots, a click, typing, "
            "a final message);")
        say("everything else is the real thing. Set ANTHROPIC_API_KEY and run `make demo MODEL=claude` again for "
            "Claude.")
    elif scripted:
        say("OPENAI_API_KEY is not set: the model is SCRIPTED. A bundled scenario plays the model's part over "
            "the real openai SDK (screenshots, a click, typing, an approval, a final message);")
        say("everything else is the real thing. Set OPENAI_API_KEY and run `make demo` again for a real model.")
    elif claude:
        say(f"using Anthropic's Messages API (MODEL=claude, ANTHROPIC_API_KEY is set: the daemon's "
            f"[models.{CLAUDE_ENTRY}] entry); the model sees the sandbox's screen")
    else:
        say("using the OpenAI API (OPENAI_API_KEY is set); the model sees the sandbox's screen")
    # Anthropic's API sends no safety checks: the default approval, safety, would never ask (docs/models.md).
    model = ["--model", CLAUDE_ENTRY, "--approval", "actions"] if claude else []
    if claude:
        say("its API sends no safety checks, so the task asks approval for every action (--approval actions)")
    cuctl = Cuctl(settings)
    # "seat1=:5,seat2=:6" when the sandbox runs several seats; one seat has no such entry.
    seats = [entry.partition("=") for entry in daemon.info["seats"].split(",")] if daemon.info.get("seats") else []
    pin: list[str] = []
    prefix = ""
    if seats:
        seat, _, place = seats[0]
        pin, prefix = ["--seat", seat], f"{seat}."
        watch = load(settings.dir / "run", f"{prefix}x11vnc") or load(settings.dir / "run", f"{prefix}xserver")
        port = watch.info.get("vnc_port", "?") if watch else "?"
        say(f"the sandbox has {len(seats)} seats; the task is pinned to the first, {seat} ({place}; "
            f"watch it on localhost::{port}). `{cuctl.shown} seats` lists them all.")
    before = len(received(settings, prefix))
    task = cuctl.json("submit", *pin, *model, PROMPT)["id"]
    say(f"submitted task {task}{f' to seat {pin[1]}' if pin else ''}: {PROMPT}")
    follow = subprocess.Popen([*cuctl.argv, "follow", str(task)])
    approved: set[int] = set()
    delay = 0.1
    try:
        while follow.poll() is None:
            for approval in cuctl.json("approvals"):
                if approval["task_id"] != task or approval["id"] in approved:
                    continue
                checks = "; ".join(check.get("message", check.get("code", "")) for check in approval.get("checks", []))
                shot = settings.path("state") / "trajectories" / str(task) / str(approval.get("screenshot", ""))
                what = checks or approval.get("actions")
                say(f"the model asks for approval {approval['id']} ({approval['kind']}): {what}")
                say(f"a human would look at {_show(shot)} and run: {cuctl.shown} approve {approval['id']}")
                say(f"or see it with its screenshot and press Approve in the browser: {cuctl.shown} console "
                    "(it prints the page's address)")
                say("(or deny it with: cuctl deny ID --reason TEXT); the demo approves it now")
                subprocess.run([*cuctl.argv, "approve", str(approval["id"])], check=True, timeout=60)
                approved.add(approval["id"])
            try:
                follow.wait(delay)
            except subprocess.TimeoutExpired:
                delay = min(delay * 2, 1.0)
    finally:
        if follow.poll() is None:
            follow.terminate()
            follow.wait()
    result = cuctl.json("show", str(task))
    got = received(settings, prefix)[before:]
    print()
    where = f" on seat {result['seat']}" if seats and result.get("seat") else ""
    say(f"task {task} {result['state']}{where} after {result['steps']} step(s)")
    if result.get("final_message"):
        say(f"the model's final message: {result['final_message']}")
    if result.get("error"):
        say(f"error: {result['error']}")
    say(f"the demo app received: {', '.join(repr(text) for text in got) if got else 'nothing'}")
    say(f"the task's record: {cuctl.shown} show {task}  (events: {cuctl.shown} follow {task});")
    say(f"  the screenshots the model saw: {_show(settings.path('state') / 'trajectories' / str(task))}/")
    if scripted:
        say(f"reminder: the model was SCRIPTED (no {key})")
    ok = result["state"] == "succeeded" and (not scripted or TEXT in got)
    if result["state"] == "succeeded" and not ok:
        say(f"but the demo app did not receive {TEXT!r}: the demo failed")
    if claude:
        say("the example suite (examples/suite) plays its scripted models over the Responses API: "
            "`make demo` without MODEL runs it after its task")
        return 0 if ok else 1
    return 0 if ok and suite(settings, cuctl, scripted) else 1


def suite(settings: Settings, cuctl: Cuctl, scripted: bool) -> bool:
    """The example suite (examples/suite): three specs, each on a seat reset to its template, judged by checks.

    One of them fails by design, so ``cuctl eval`` exits 1; the demo fails only if the suite could not run
    (exit 2) or the specs did not end as examples/suite/README.md says."""
    out = settings.path(time.strftime("eval-%Y%m%d-%H%M%S"))
    model = [] if scripted else ["--model", DEFAULT_MODEL]  # the sandbox's daemon's own model
    print()
    say("now a suite: examples/suite, three task specs (a mousepad edit, the demo app's form, a file task that "
        "fails by design); each seat is reset to its template before each, and checks judge what is left.")
    say(f"  {cuctl.shown} eval examples/suite --allow-files-outside --out {_show(out)} --junit {_show(out)}.junit.xml")
    say("  (a reset ends what runs on the seat, the sandbox's demo app too: it is started again after the suite)")
    done = subprocess.run([*cuctl.argv, "eval", _show(ROOT / "examples" / "suite"), "--out", str(out),
                           "--junit", f"{out}.junit.xml", "--allow-files-outside", *model], timeout=1800)
    # What make demo ran before this (sandbox-up, same environment) restarts the parts the resets ended.
    again = subprocess.run([str(settings.venv / "bin" / "python"), str(ROOT / "sandbox" / "sandboxctl.py"), "up"],
                           capture_output=True, text=True, timeout=600)
    if again.returncode != 0:
        say(f"restarting the sandbox's demo apps failed: {again.stdout}{again.stderr}")
        return False
    say("the sandbox's demo apps run again")
    if done.returncode == 2:
        say("the suite could not run (see above)")
        return False
    runs = {Path(r["spec"]).stem: r["outcome"] for r in json.loads((out / "results.json").read_text())["runs"]}
    say(f"every task's report and video: {_show(out / 'index.html')}")
    expected = {"notes-edit": "passed", "demo-form": "passed", "file-count": "failed"}
    if scripted and runs != expected:
        say(f"the suite's runs ended {runs}, not {expected} as examples/suite/README.md says")
        return False
    return True


def main() -> int:
    started = time.monotonic()
    try:
        # The seats are what sandbox-up started (read from its records), not $SEATS.
        code = run(Settings.from_env(ROOT, seats=False))
    except SandboxError as exc:
        say(str(exc))
        return 1
    outcome = "done" if code == 0 else "FAILED"
    say(f"{outcome} in {time.monotonic() - started:.1f}s; `make sandbox-down` stops the sandbox")
    return code


if __name__ == "__main__":
    sys.exit(main())
