"""The reference pages are complete by construction: each lists every entry the code itself defines.

Every list below is read from the code (or from the real daemon), never copied into
this file, so a new command, option, config key, metric, event or export file fails a
test here, naming the entry and the page, until the page has it:

* docs/cuctl.md: every command of ``cuctl`` (walking :func:`cud.cuctl.main.build_parser`),
  each one's arguments, options and their choices in its usage, and the global options; no
  row for a command cuctl lacks; and the columns it names for ``list``, ``seats`` and
  ``approvals`` are the ones cuctl prints, in order; docs/daemon.md: every flag of ``cud run``
  (:func:`cud.daemon.main.build_parser`) in its usage;
* docs/config.md: every top-level key (:data:`cud.daemon.config.TOP_KEYS`) in its table of
  top-level keys, and every key of every table (:data:`CONFIG_TABLES`: each table's own key
  constant, the one its checker uses) under a heading naming the table, on config.md or on
  the page config.md links for it; ``[request]``, whose keys are the openai SDK's, links the
  SDK's ``ResponseCreateParams`` and names the keys the loop owns. A test asks the loader
  itself which top-level keys take a table, so a new table cannot miss an entry here;
* docs/metrics.md: every metric family ``cuctl metrics`` prints from a running daemon, and
  none it does not print;
* docs/report.md: every kind of task event (:data:`cud.protocol.EVENT_KINDS`, the only kinds
  the store writes) and none other; docs/notifications.md: every ``[[notify]]`` event
  (:data:`cud.daemon.hooks.config.EVENTS`);
* docs/report.md's export layout: every file and folder ``cuctl export`` writes for a real
  task that was recorded on video.

A key, an event or a metric counts as documented when a table row starts with it in code
(`` `name` ``), or, for config keys, when an example line in a code block sets it and says
in a comment what it is (``name = value  # what it does``; the line may be commented out).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.cuctl.main import build_parser as build_cuctl_parser
from cud.daemon.budget.config import BUDGET_KEYS, PRICE_KEYS
from cud.daemon.config import ACCESS_KEYS, METRICS_KEYS, POLICY_KEYS, RETENTION_KEYS, TOP_KEYS, load_config
from cud.daemon.fleet.config import FLEET_KEYS
from cud.daemon.hooks.config import EVENTS, HOOK_KEYS
from cud.daemon.main import build_parser as build_daemon_parser
from cud.daemon.model.history import HISTORY_KEYS
from cud.daemon.model.request_params import LOOP_OWNED
from cud.daemon.model.table import MODEL_KEYS
from cud.daemon.seats.config import SEAT_KEYS
from cud.daemon.session.config import SESSIONS_KEYS
from cud.daemon.targets.rules import RULE_KEYS
from cud.daemon.tasks.guard_config import GUARD_KEYS
from cud.daemon.video.config import VIDEO_KEYS
from cud.errors import ConfigError
from cud.protocol import EVENT_KINDS
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon, cuctl, scenario
from tests.support.xserver import XServer, start_xvfb
from tests.test_docs import DOCS, links


@dataclasses.dataclass(frozen=True)
class Table:
    """A config table: how the file spells it, the keys its checker accepts, the page that documents them."""

    spelling: str
    #: None for ``[request]``: its keys are the openai SDK's, documented by a link (see the test).
    keys: frozenset[str] | None
    page: str

    @property
    def path(self) -> str:
        return self.spelling.strip("[]")


#: Every table of the config. A new table gets a line here: its spelling, its module's key
#: constant (the set its checker is given), its page; the test below checks that none is missing.
CONFIG_TABLES = (
    Table("[[seats]]", SEAT_KEYS, "config.md"),
    Table("[access]", ACCESS_KEYS, "config.md"),
    Table("[retention]", RETENTION_KEYS, "config.md"),
    Table("[metrics]", METRICS_KEYS, "config.md"),
    Table("[request]", None, "config.md"),
    Table("[history]", HISTORY_KEYS, "long-tasks.md"),
    Table("[policy]", POLICY_KEYS, "targets.md"),
    Table("[[policy.rules]]", RULE_KEYS, "targets.md"),
    Table("[[notify]]", HOOK_KEYS, "notifications.md"),
    Table("[video]", VIDEO_KEYS, "video.md"),
    Table("[sessions]", SESSIONS_KEYS, "config.md"),
    Table("[fleet]", FLEET_KEYS, "fleet-reference.md"),
    Table("[budget]", BUDGET_KEYS, "budgets.md"),
    Table("[budget.prices]", PRICE_KEYS, "budgets.md"),  # one table per model: [budget.prices."MODEL"]
    Table("[guard]", GUARD_KEYS, "stuck.md"),
    Table("[models]", MODEL_KEYS, "models.md"),  # one table per model: [models.NAME]
)
#: The commands that print a table: what docs/cuctl.md says their columns are must be what they print.
TABLE_COMMANDS = ("list", "seats", "approvals")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE = re.compile(r"`([^`]+)`")
#: ``key = value  # what it is`` in a code block (or ``# key = value  # ...``, commented out).
_SETTING = re.compile(r"^\s*(?:#\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*=[^#]*#\s*\S")


# -- reading a page ------------------------------------------------------------------------------
def page(name: str) -> str:
    return (DOCS / name).read_text()


def section(name: str, title: str) -> str:
    """The part of docs/``name`` under its first heading containing ``title``, up to the next heading
    of the same or a higher level (headings inside code blocks are not headings)."""
    lines = page(name).splitlines()
    start, level, fenced = None, 0, False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading is None:
            continue
        if start is None and title in heading.group(2):
            start, level = index, len(heading.group(1))
        elif start is not None and len(heading.group(1)) <= level:
            return "\n".join(lines[start:index])
    if start is None:
        pytest.fail(f"docs/{name} has no heading naming {title!r}")
    return "\n".join(lines[start:])


def rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row of ``text`` (separator rows left out)."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith("|"):
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if not all(re.fullmatch(r":?-*:?", cell) for cell in cells):
                out.append(cells)
    return out


def row_names(text: str) -> set[str]:
    """What the table rows of ``text`` are about: the code in their first cells."""
    return {name for cells in rows(text) for name in _CODE.findall(cells[0])}


def documented_keys(text: str) -> set[str]:
    """Config keys ``text`` documents: in a table row's first cell, or on a commented example line of a code block."""
    keys, fenced = row_names(text), False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif fenced and (setting := _SETTING.match(line)):
            keys.add(setting.group(1))
    return keys


# -- cuctl ---------------------------------------------------------------------------------------
def cuctl_commands() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """cuctl's parser and each command's own. argparse has no public walk: ``_actions`` is the one it keeps."""
    parser = build_cuctl_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, dict(sub.choices)


def documented_commands() -> dict[str, str]:
    """docs/cuctl.md's command table: each command's name and its whole row."""
    table = {}
    for cells in rows(page("cuctl.md")):
        usage = _CODE.findall(cells[0])
        if usage and usage[0].startswith("cuctl "):
            table[usage[0].split()[1]] = " | ".join(cells)
    return table


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def unlisted(parser: argparse.ArgumentParser, usage: str, skip: set[str]) -> list[str]:
    """The arguments, options (but ``skip``'s) and choices of ``parser`` that ``usage`` does not show."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or set(action.option_strings) & skip:
            continue
        if not action.option_strings and action.choices:
            pass  # a positional with choices is shown by its choices (`get|set`), checked below
        elif not action.option_strings:
            word = str(action.metavar or action.dest.upper())
            if not _mentions(usage, word):
                missing.append(f"argument {word}")
        elif not any(_mentions(usage, option) for option in action.option_strings):
            missing.append(f"option {'/'.join(action.option_strings)}")
        missing += [f"choice {choice!r} of {'/'.join(action.option_strings)}"
                    for choice in action.choices or () if not _mentions(usage, str(choice))]
    return missing


def test_every_cuctl_command_and_option_is_in_cuctl_md() -> None:
    parser, commands = cuctl_commands()
    documented = documented_commands()
    assert len(commands) > 15 and len(documented) > 15  # the walks found them
    global_options = {o for a in parser._actions for o in a.option_strings if not isinstance(a, argparse._HelpAction)}
    assert {"--host", "--socket", "--json"} <= global_options
    missing = [f"the global option {option}" for option in sorted(global_options)
               if not _mentions(page("cuctl.md"), option)]
    for name, sub in commands.items():
        row = documented.get(name)
        if row is None:
            missing.append(f"the command `cuctl {name}`")
            continue
        usage = _CODE.findall(row)[0]  # the row's first code: `cuctl NAME ARGUMENTS [OPTIONS]`
        missing += [f"`cuctl {name}`'s {what} in its usage `{usage}`" for what in unlisted(sub, usage, global_options)]
    assert not missing, "docs/cuctl.md lacks " + "; ".join(missing)
    extra = sorted(set(documented) - set(commands))
    assert not extra, f"docs/cuctl.md lists commands cuctl does not have: {', '.join(extra)}"


def test_every_cud_run_flag_is_in_daemon_md() -> None:
    sub = next(a for a in build_daemon_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = section("daemon.md", "`cud run`")
    usage = text[text.index("```"):text.index("```", text.index("```") + 3)]  # the page's first code block
    missing = [f"the command `cud {name}`" for name in sub.choices if f"cud {name}" not in usage]
    missing += [f"`cud {name}`'s {what}" for name, parser in sub.choices.items()
                for what in unlisted(parser, usage, set())]
    assert not missing, "docs/daemon.md's usage lacks " + "; ".join(missing)


# -- the config ----------------------------------------------------------------------------------
def _takes_a_table(key: str, scratch: Path) -> bool:
    """Whether the loader reads ``key`` as a table or an array of tables: it accepts ``key = {}`` or
    ``key = [{}]``, or refuses it for a key inside it (a scalar key is refused under its own name)."""
    for value in ("{}", "[{}]"):
        path = scratch / "probe.toml"
        path.write_text(f"{key} = {value}\n")
        try:
            load_config(path, env={"DISPLAY": ":99", "XDG_RUNTIME_DIR": str(scratch)})
        except ConfigError as exc:
            inner = str(exc.details.get("key", ""))
            if inner.startswith((f"{key}.", f"{key}[")):
                return True
            # Refused under its own name, or for a key it goes with (`home` needs `user`): a scalar.
        else:
            return True
    return False


def test_every_table_the_loader_reads_has_an_entry_in_config_tables(tmp_path: Path) -> None:
    tables = {key for key in TOP_KEYS if _takes_a_table(key, tmp_path)}
    assert {"seats", "notify", "video"} <= tables and "socket" not in tables  # the probe tells them apart
    entries = {table.path.split(".")[0] for table in CONFIG_TABLES}
    unlisted, extra = sorted(tables - entries), sorted(entries - tables)
    assert not unlisted, (f"config keys that take a table but have no entry in CONFIG_TABLES (add its spelling, "
                          f"its module's key constant, the page that documents it): {', '.join(unlisted)}")
    assert not extra, f"CONFIG_TABLES has entries for top-level keys that take no table: {', '.join(extra)}"
    by_path = {table.path: table for table in CONFIG_TABLES}
    for table in CONFIG_TABLES:  # a nested table is a key of the table it is in
        parent, dot, name = table.path.rpartition(".")
        if dot:
            keys = by_path[parent].keys
            assert keys is not None and name in keys, f"{table.spelling}: {parent!r} has no key {name!r}"


def test_every_top_level_key_is_in_config_md() -> None:
    scalars = TOP_KEYS - {table.path.split(".")[0] for table in CONFIG_TABLES}
    top = row_names(section("config.md", "Top-level keys"))
    missing, extra = sorted(scalars - top), sorted(top - scalars)
    assert not missing, f"docs/config.md's table of top-level keys lacks: {', '.join(missing)}"
    assert not extra, f"docs/config.md's table of top-level keys names keys the loader refuses: {', '.join(extra)}"


@pytest.mark.parametrize("table", [t for t in CONFIG_TABLES if t.keys is not None], ids=lambda t: t.spelling)
def test_every_key_of_every_table_is_documented(table: Table) -> None:
    assert table.keys is not None
    nested = {t.path.rpartition(".")[2] for t in CONFIG_TABLES if t.path.rpartition(".")[0] == table.path}
    keys = table.keys - nested
    if not keys:  # a table of tables alone ([policy]) has nothing of its own to say
        return
    missing = sorted(keys - documented_keys(section(table.page, table.spelling)))
    assert not missing, f"docs/{table.page} lacks keys of {table.spelling} under its heading: {', '.join(missing)}"
    if table.page != "config.md":  # the config's page leads to it
        config = page("config.md")
        named, linked = f"`{table.spelling}`" in config, table.page in [t.partition("#")[0] for t in links(config)]
        assert named and linked, (f"docs/config.md must name `{table.spelling}` (named: {named}) and link "
                                  f"docs/{table.page}, where its keys are (linked: {linked})")


def test_request_links_the_sdks_parameters_and_names_the_keys_the_loop_owns() -> None:
    text = section("config.md", "[request]")
    assert "ResponseCreateParams" in text and any("response_create_params" in target for target in links(text)), (
        "docs/config.md's [request] must say its keys are the openai SDK's ResponseCreateParams and link them")
    named = {name for span in _CODE.findall(text) for name in re.findall(r"\w+", span)}
    missing = sorted(set(LOOP_OWNED) - named)
    assert not missing, f"docs/config.md's [request] lacks keys the loop owns (and refuses): {', '.join(missing)}"


# -- events --------------------------------------------------------------------------------------
def test_every_task_event_kind_is_in_report_md() -> None:
    documented = row_names(section("report.md", "The events"))
    missing, extra = sorted(set(EVENT_KINDS) - documented), sorted(documented - set(EVENT_KINDS))
    assert not missing, f"docs/report.md's table of events lacks: {', '.join(missing)}"
    assert not extra, f"docs/report.md's table of events lists kinds the store never writes: {', '.join(extra)}"


def test_every_notify_event_is_in_notifications_md() -> None:
    missing = sorted(set(EVENTS) - row_names(page("notifications.md")))
    assert not missing, f"docs/notifications.md's table of events lacks: {', '.join(missing)}"


# -- what a running daemon prints ----------------------------------------------------------------
@pytest.fixture(scope="module")
def xserver() -> Iterator[XServer]:
    logs = Path(tempfile.mkdtemp(prefix="cud-docs-"))
    server = start_xvfb(logs)
    yield server
    server.stop()
    shutil.rmtree(logs, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(xserver: XServer) -> Iterator[Daemon]:
    """A daemon that records each task's video, and its scripted model."""
    model = ScriptedModel(scenario({"message": "done"}))
    running = Daemon(xserver.display, model.start(), config="[video]\nenabled = true\n")
    try:
        yield running.start()
    finally:
        running.cleanup()
        model.stop()


@pytest.fixture(scope="module")
def recorded_task(daemon: Daemon) -> int:
    """A task that ran to its end on video: its export has every kind of file."""
    task_id = int(daemon.call("submit", prompt="look")["id"])
    assert daemon.wait_state(task_id, "succeeded", "failed")["state"] == "succeeded"
    return task_id


def test_every_metric_is_in_metrics_md(daemon: Daemon) -> None:
    result = cuctl(daemon.socket, "metrics")
    assert result.returncode == 0, result.stderr
    families = set(re.findall(r"^# TYPE (\S+) ", result.stdout, re.MULTILINE))
    # prometheus_client adds a NAME_created family beside each counter and histogram (when it began):
    # part of its metric, not one of its own.
    exposed = {name for name in families if not (name.endswith("_created") and (
        name.removesuffix("_created") in families or name.removesuffix("_created") + "_total" in families))}
    assert len(exposed) > 10  # the daemon's whole registry, not an error page
    documented = {name for name in row_names(page("metrics.md")) if name.startswith("cud_")}
    missing, extra = sorted(exposed - documented), sorted(documented - exposed)
    assert not missing, f"docs/metrics.md's table of metrics lacks: {', '.join(missing)}"
    assert not extra, f"docs/metrics.md's table lists metrics the daemon does not have: {', '.join(extra)}"


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_the_columns_cuctl_md_names_are_the_ones_cuctl_prints(daemon: Daemon, command: str) -> None:
    result = cuctl(daemon.socket, command)
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()[0].split()
    # The row says "columns `ID`, `TASK` (what it is), ...": every capitals-only code after "columns".
    row = documented_commands().get(command, "")
    named = [span for span in _CODE.findall(row.partition("columns ")[2]) if re.fullmatch(r"[A-Z][A-Z_]*", span)]
    assert named == printed, f"docs/cuctl.md's `cuctl {command}` row names columns {named}; cuctl prints {printed}"


def test_every_file_export_writes_is_in_report_md(daemon: Daemon, recorded_task: int, tmp_path: Path) -> None:
    target = tmp_path / "export"
    result = cuctl(daemon.socket, "export", str(recorded_task), "-o", str(target))
    assert result.returncode == 0, result.stderr
    written = sorted(p.name + "/" if p.is_dir() else p.name for p in target.iterdir())
    assert "video.mp4" in written and "screenshots/" in written  # a task with every kind of file
    layout = section("report.md", "Export")
    missing = [name for name in written if f"DIR/{name}" not in layout]
    assert not missing, f"docs/report.md's export layout lacks what cuctl export writes: {', '.join(missing)}"
