"""The daemon's configuration: a TOML file, overridden by command-line flags.

Every value is checked here, once; a bad one raises ConfigError naming the key
and the value. The rest of the daemon receives a frozen :class:`Config`.
The API key is resolved separately (:func:`resolve_api_key`) and never stored
in the Config, so printing a Config can never leak it.
"""

from __future__ import annotations

import dataclasses
import grp
import os
import pwd
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from cud.daemon.budget.config import BudgetConfig, amount, load_budget, tokens
from cud.daemon.config_values import (
    bad,
    int_in_range,
    positive_int,
    positive_number,
    read_secret_file,
    seconds_in_range,
    string,
)
from cud.daemon.config_values import table as checked_table
from cud.daemon.fleet.config import FleetConfig, load_fleet
from cud.daemon.hooks.config import HookConfig, load_hooks
from cud.daemon.model.history import History, load_history
from cud.daemon.model.table import ModelEntry, load_models
from cud.daemon.seats.config import SeatConfig, check_seat_places, load_seats
from cud.daemon.session.config import SessionLimits, load_session_limits
from cud.daemon.targets.rules import Rule, parse_rules
from cud.daemon.tasks.guard_config import GuardConfig, load_guard
from cud.daemon.video.config import VideoConfig, load_video
from cud.errors import ConfigError
from cud.protocol import APPROVAL_MODES, MAX_DURATION_LIMIT

__all__ = ("ACCESS_KEYS", "Config", "METRICS_KEYS", "POLICY_KEYS", "RETENTION_KEYS", "TOP_KEYS", "default_socket",
           "load_config", "read_secret_file", "resolve_api_key")

DEFAULT_MODEL = "gpt-5.4"

#: The keys the loader accepts at the top level of the file (each table's own keys are its room's).
TOP_KEYS = frozenset({
    "socket",
    "fleet",  # cud fleet join's (daemon/fleet/config.py); the daemon itself does not use it
    "state_dir",
    "display",
    "vnc",
    "vnc_password_file",
    "vnc_horizontal_scroll",
    "session_bus",
    "x_display",
    "user",
    "home",
    "home_template",
    "empty_existing_home",
    "session_unit",
    "private_tmp",
    "home_path",
    "network",
    "seats",
    "model",
    "models",
    "api_key_file",
    "api_key_credential",
    "base_url",
    "approval",
    "approval_timeout",
    "max_steps",
    "max_duration",
    "max_cost",
    "max_input_tokens",
    "max_output_tokens",
    "budget",
    "wait_seconds",
    "settle_timeout",
    "driver_timeout",
    "driver_processes",
    "max_connections",
    "access",
    "retention",
    "request",
    "history",
    "max_retries",
    "metrics",
    "notify",
    "policy",
    "target_timeout",
    "video",
    "sessions",
    "guard",
})
#: The keys of ``[access]``, ``[retention]``, ``[metrics]`` and ``[policy]``, the tables checked here.
ACCESS_KEYS = frozenset({"submit_users", "submit_groups", "approve_users", "approve_groups", "operate_users",
                         "operate_groups"})
RETENTION_KEYS = frozenset({"max_tasks", "max_age_days"})
METRICS_KEYS = frozenset({"textfile", "interval"})
POLICY_KEYS = frozenset({"rules"})
#: Seconds between rewrites of the metrics textfile: node_exporter reads it on every scrape
#: (15 s is Prometheus's usual scrape interval), so writing more often would buy nothing.
METRICS_INTERVAL = 15.0


@dataclasses.dataclass(frozen=True)
class Access:
    submit_users: tuple[str, ...] = ()
    submit_groups: tuple[str, ...] = ()
    approve_users: tuple[str, ...] = ()
    approve_groups: tuple[str, ...] = ()
    #: Who may run code and move files on a seat's session (cuctl exec/cp/clipboard/reset, a spec's run).
    operate_users: tuple[str, ...] = ()
    operate_groups: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Retention:
    max_tasks: int = 1000
    max_age_days: float = 30.0


@dataclasses.dataclass(frozen=True)
class Metrics:
    #: Where the daemon writes its metrics for node_exporter's textfile collector; None: nowhere.
    textfile: Path | None = None
    #: Seconds between rewrites (a setting mainly so tests need not wait 15 s).
    interval: float = METRICS_INTERVAL


@dataclasses.dataclass(frozen=True)
class Config:
    socket: Path
    state_dir: Path
    #: The displays driven, one task at a time each (see cud.daemon.seats.config).
    seats: tuple[SeatConfig, ...]
    model: str = DEFAULT_MODEL
    #: ``[models.NAME]``: the API each named model is driven through (see cud.daemon.model.table).
    models: Mapping[str, ModelEntry] = dataclasses.field(default_factory=dict, hash=False)
    api_key_file: Path | None = None
    api_key_credential: str | None = None
    base_url: str | None = None
    approval: str = "safety"
    approval_timeout: float = 600.0
    max_steps: int = 50
    #: Seconds a task may run, approvals included: the default and the ceiling per task.
    max_duration: int = 3600
    #: A task's budgets (docs/budgets.md): each task's default and ceiling; None: no limit.
    max_cost: Decimal | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    #: ``[budget]``: the currency, the price table, the day's cap, what happens at the line.
    budget: BudgetConfig = BudgetConfig()
    wait_seconds: float = 1.0
    settle_timeout: float = 2.0
    #: Seconds any one driver call may go without an answer from the display.
    driver_timeout: float = 10.0
    #: Each seat's driver in a process of its own (cud.drivers.worker) rather than on a thread of the daemon.
    driver_processes: bool = False
    #: Client connections served at once (also bounded by the file-descriptor limit).
    max_connections: int = 1024
    access: Access = Access()
    retention: Retention = Retention()
    metrics: Metrics = Metrics()
    #: ``[[policy.rules]]``: allow / ask / deny by what an action touches (see cud.daemon.targets.rules).
    rules: tuple[Rule, ...] = ()
    #: Seconds one lookup of what an action touches may take before the action runs without it.
    target_timeout: float = 0.1  # cud.daemon.targets.lookup.HARD_TIMEOUT (not imported: it needs X and D-Bus libraries)
    #: How tasks on X11 seats are recorded as video (see cud.daemon.video.config).
    video: VideoConfig = VideoConfig()
    #: Extra Responses parameters for every model request (see cud.daemon.model.request_params), as written.
    request: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False)
    #: What of a task's history is sent each step (see cud.daemon.model.history).
    history: History = History()
    #: Retries of a model request the API answered 408/409/429/5xx, with the SDK's back-off.
    max_retries: int = 2
    #: The [[notify]] hooks (see cud.daemon.hooks.config), in the order written.
    notify: tuple[HookConfig, ...] = ()
    #: What the seats' sessions move through the socket, and how long a command may run (docs/sessions.md).
    sessions: SessionLimits = SessionLimits()
    #: ``[fleet]``: what ``cud fleet join`` reads (the daemon itself does not use it).
    fleet: FleetConfig = FleetConfig()
    #: ``[guard]``: when a task's model is stuck, and what then (see cud.daemon.tasks.stuck).
    guard: GuardConfig = GuardConfig()


def default_socket(env: Mapping[str, str] | None = None) -> Path:
    """$CUD_SOCKET, else /run/cud/cud.sock as root, else $XDG_RUNTIME_DIR/cud.sock."""
    env = os.environ if env is None else env
    if env.get("CUD_SOCKET"):
        return Path(env["CUD_SOCKET"])
    if os.geteuid() == 0:
        return Path("/run/cud/cud.sock")
    runtime = env.get("XDG_RUNTIME_DIR")
    if not runtime:
        raise ConfigError(
            "no socket path: pass --socket, set CUD_SOCKET, or set XDG_RUNTIME_DIR",
            key="socket",
        )
    return Path(runtime) / "cud.sock"


def _default_state_dir(env: Mapping[str, str]) -> Path:
    if env.get("STATE_DIRECTORY"):  # set by systemd's StateDirectory=
        return Path(env["STATE_DIRECTORY"].split(":")[0])
    if os.geteuid() == 0:
        return Path("/var/lib/cud")
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "cud"


# -- value checks ----------------------------------------------------------------------------
def _names(key: str, value: object, *, groups: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise bad(key, value, "a list of names or numeric ids")
    out = []
    for item in value:
        name = str(item)
        try:
            if groups:
                grp.getgrgid(item) if isinstance(item, int) else grp.getgrnam(name)
            else:
                pwd.getpwuid(item) if isinstance(item, int) else pwd.getpwnam(name)
        except KeyError:
            what = "group" if groups else "user"
            raise ConfigError(f"config key {key!r} names an unknown {what} {item!r}", key=key, value=repr(item)) from None
        out.append(name)
    return tuple(out)


def _metrics(value: object, flag: object) -> Metrics:
    """``[metrics]``, with ``--metrics-textfile`` (the flag wins over the file's ``textfile``)."""
    table = checked_table("metrics", value, METRICS_KEYS)
    values: dict[str, Any] = {}
    textfile = flag if flag is not None else table.get("textfile")
    if textfile is not None:
        path = Path(string("metrics.textfile", textfile))
        # Checked now, not at the first write 15 s later: a typo should stop `cud run` at once.
        if not path.parent.is_dir():
            raise bad("metrics.textfile", textfile, "a file in an existing directory")
        if path.is_dir():
            raise bad("metrics.textfile", textfile, "a file, not a directory")
        values["textfile"] = path
    if "interval" in table:
        values["interval"] = seconds_in_range("metrics.interval", table["interval"], 0.01, 3600)
    return Metrics(**values)


def load_config(
    path: Path | None = None, overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Read ``path`` (TOML) if given, apply ``overrides`` (flags; None means unset), check everything."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as fh:
                raw = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}", path=str(path)) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}", path=str(path)) from None
    checked_table("", raw, TOP_KEYS)
    merged = {**raw, **{key: value for key, value in (overrides or {}).items() if value is not None}}
    kwargs: dict[str, Any] = {"seats": load_seats(raw, overrides or {}, env)}
    kwargs["socket"] = Path(string("socket", merged["socket"])) if "socket" in merged else default_socket(env)
    kwargs["state_dir"] = (
        Path(string("state_dir", merged["state_dir"])) if "state_dir" in merged else _default_state_dir(env)
    )
    if "model" in merged:
        kwargs["model"] = string("model", merged["model"])
    if "models" in raw:
        kwargs["models"] = load_models(raw["models"])
    if "api_key_file" in merged and "api_key_credential" in merged:
        raise ConfigError("config keys 'api_key_file' and 'api_key_credential' exclude each other", key="api_key_file")
    if "api_key_file" in merged:
        kwargs["api_key_file"] = Path(string("api_key_file", merged["api_key_file"]))
    if "api_key_credential" in merged:
        name = string("api_key_credential", merged["api_key_credential"])
        if "/" in name or name in (".", ".."):
            raise bad("api_key_credential", name, "a credential name without '/'")
        kwargs["api_key_credential"] = name
    base_url = merged.get("base_url", env.get("OPENAI_BASE_URL") or None)
    if base_url is not None:
        text = string("base_url", base_url)
        if not text.startswith(("http://", "https://")):
            raise bad("base_url", base_url, "an http:// or https:// URL")
        kwargs["base_url"] = text
    if "approval" in merged:
        if merged["approval"] not in APPROVAL_MODES:
            raise bad("approval", merged["approval"], " or ".join(repr(p) for p in APPROVAL_MODES))
        kwargs["approval"] = merged["approval"]
    if "approval_timeout" in merged:
        kwargs["approval_timeout"] = positive_number("approval_timeout", merged["approval_timeout"])
    if "max_steps" in merged:
        kwargs["max_steps"] = positive_int("max_steps", merged["max_steps"])
    if "max_duration" in merged:
        kwargs["max_duration"] = int_in_range("max_duration", merged["max_duration"], 1, MAX_DURATION_LIMIT)
    if "max_cost" in merged:
        kwargs["max_cost"] = amount("max_cost", merged["max_cost"])
    for key in ("max_input_tokens", "max_output_tokens"):
        if key in merged:
            kwargs[key] = tokens(key, merged[key])
    if "budget" in merged:
        kwargs["budget"] = load_budget(merged["budget"])
    if "wait_seconds" in merged:
        kwargs["wait_seconds"] = positive_number("wait_seconds", merged["wait_seconds"], allow_zero=True)
    if "settle_timeout" in merged:
        kwargs["settle_timeout"] = positive_number("settle_timeout", merged["settle_timeout"], allow_zero=True)
    if "driver_timeout" in merged:
        kwargs["driver_timeout"] = seconds_in_range("driver_timeout", merged["driver_timeout"], 0.5, 600)
    if "driver_processes" in merged:
        if not isinstance(merged["driver_processes"], bool):
            raise bad("driver_processes", merged["driver_processes"], "true or false")
        kwargs["driver_processes"] = merged["driver_processes"]
    if "max_connections" in merged:
        kwargs["max_connections"] = int_in_range("max_connections", merged["max_connections"], 1, 65536)
    if "access" in merged:
        table = checked_table("access", merged["access"], ACCESS_KEYS)
        kwargs["access"] = Access(
            **{k: _names(f"access.{k}", v, groups=k.endswith("groups")) for k, v in table.items()}
        )
    if "retention" in merged:
        table = checked_table("retention", merged["retention"], RETENTION_KEYS)
        values: dict[str, Any] = {}
        if "max_tasks" in table:
            values["max_tasks"] = positive_int("retention.max_tasks", table["max_tasks"])
        if "max_age_days" in table:
            values["max_age_days"] = positive_number("retention.max_age_days", table["max_age_days"])
        kwargs["retention"] = Retention(**values)
    if "metrics" in merged or "metrics_textfile" in merged:  # the flag: only there, never in the file
        kwargs["metrics"] = _metrics(merged.get("metrics", {}), merged.get("metrics_textfile"))
    if "fleet" in raw:
        kwargs["fleet"] = load_fleet(raw["fleet"])
    if "target_timeout" in merged:
        kwargs["target_timeout"] = seconds_in_range("target_timeout", merged["target_timeout"], 0.01, 5)
    if "policy" in merged:
        kwargs["rules"] = parse_rules("policy.rules", checked_table("policy", merged["policy"], POLICY_KEYS).get("rules", []))
    if "video" in merged:
        kwargs["video"] = load_video(merged["video"])
    if "guard" in merged:
        kwargs["guard"] = load_guard(merged["guard"])
    if "request" in merged:
        # Imported here: it builds validators from the openai SDK's types, which a config
        # without [request] (and `cud --help`) should not pay for.
        from cud.daemon.model.request_params import check_request

        kwargs["request"] = check_request(merged["request"])
    if "history" in merged or kwargs.get("request", {}).get("store") is False:
        kwargs["history"] = load_history(merged.get("history", {}), kwargs.get("request", {}))
    if "max_retries" in merged:
        kwargs["max_retries"] = int_in_range("max_retries", merged["max_retries"], 0, 10)
    if "notify" in raw:
        kwargs["notify"] = load_hooks(raw["notify"], env)
    if "sessions" in merged:
        kwargs["sessions"] = load_session_limits(merged["sessions"])
    if "fleet" in kwargs and kwargs["fleet"].tags:  # a node's tags label each of its seats
        kwargs["seats"] = tuple(dataclasses.replace(seat, tags=tuple(dict.fromkeys((*seat.tags, *kwargs["fleet"].tags))))
                                for seat in kwargs["seats"])
    check_seat_places(kwargs["seats"], {"the daemon's state directory": str(kwargs["state_dir"]),
                                        "the daemon's socket": str(kwargs["socket"])},
                      _daemon_home(), tables=len(kwargs["seats"]) > 1 or "seats" in raw, files=_daemon_files(kwargs),
                      written={"metrics.textfile"}, state_dir=kwargs["state_dir"])
    return Config(**kwargs)


def _daemon_files(kwargs: Mapping[str, Any]) -> dict[str, Path]:
    """The secrets the daemon reads and the files it writes, by config key: no seat's user may reach them."""
    files: dict[str, Path] = {}
    if kwargs.get("api_key_file") is not None:
        files["api_key_file"] = kwargs["api_key_file"]
    metrics: Metrics = kwargs.get("metrics", Metrics())
    if metrics.textfile is not None:
        files["metrics.textfile"] = metrics.textfile
    for index, hook in enumerate(kwargs.get("notify", ())):
        if hook.secret_file is not None:
            files[f"notify[{index}].secret_file"] = hook.secret_file
    return files


def _daemon_home() -> str | None:
    """The home of the user the daemon runs as (a seat's home may not be it, nor hold it)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return None


def resolve_api_key(config: Config, env: Mapping[str, str] | None = None) -> str | None:
    """The API key from the key file, the systemd credential, or OPENAI_API_KEY (in that order); None
    if none is set (the daemon starts, and refuses the tasks whose model needs it). A file or credential
    the config names but that cannot be read is a ConfigError."""
    env = os.environ if env is None else env
    if config.api_key_file is not None:
        return read_secret_file(config.api_key_file, "api_key_file")
    if config.api_key_credential is not None:
        directory = env.get("CREDENTIALS_DIRECTORY")
        if not directory:
            raise ConfigError(
                f"config key 'api_key_credential' names {config.api_key_credential!r} but CREDENTIALS_DIRECTORY "
                "is not set (use LoadCredential= in the unit)",
                key="api_key_credential",
            )
        return read_secret_file(Path(directory) / config.api_key_credential, "api_key_credential")
    return env.get("OPENAI_API_KEY", "").strip() or None
