"""cuctl eval|submit --fleet, and cuctl fleet status|results|approvals|approve|deny (docs/fleet-reference.md).

These talk to a Ray cluster, not to one daemon: Ray is imported only here and in cud.fleet, when
one of them runs (without the fleet extra they say which to install).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from cud.cuctl.approvals import approval_rows
from cud.cuctl.eval import finish, names, new_results, start_results
from cud.cuctl.eval_loop import say
from cud.cuctl.output import emit_json, table
from cud.errors import ConfigError
from cud.fleet import NAMESPACE, need_ray
from cud.fleet.book import KEEP_DONE_JOBS
from cud.suite.plan import plan
from cud.suite.results import RESULTS_FILE, Results

__all__ = ("connect", "eval_fleet", "submit_fleet", "status", "results", "approvals", "approve", "deny")

#: The Ray job's id is this and the suite's run id.
JOB_PREFIX = "cud-"


_dashboard: list[str | None] = []


def connect(address: str, what: str) -> Any:
    """Ray, connected to the fleet's head at ``address`` (HOST:PORT) as a driver in cud's namespace."""
    ray = need_ray(what)
    if not ray.is_initialized():
        context = ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level="WARNING")
        _dashboard.append(context.dashboard_url or None)
    return ray


def eval_fleet(args: argparse.Namespace) -> int:
    """``cuctl eval --fleet``: the suite here (or, with --detach, as a Ray job on the head)."""
    need_ray("cuctl eval --fleet")
    if args.seats or args.resume and args.detach:
        raise ConfigError("cuctl eval --fleet takes no --seats (a spec's seat picks one across the fleet), nor "
                          "--resume with --detach", key="fleet")
    if args.detach and getattr(args, "skip_unconvertible", False):
        # A detached suite's job gets the specs to run, not runs already judged: a task listed as not converted
        # would be lost on the way, so it is refused here.
        raise ConfigError("cuctl eval --fleet --detach takes no --skip-unconvertible: run the suite attached "
                          "(without --detach) to list the tasks that do not convert", key="skip_unconvertible")
    if args.detach:
        return _detach(args)
    results, planned, folder = start_results(args)
    connect(args.fleet, "cuctl eval --fleet")
    from cud.fleet.suite import FleetSuite

    results.suite["fleet"] = args.fleet
    results.save(folder)
    FleetSuite(results, {p.name: p for p in planned}, folder).run()
    return finish(results, folder, args)


def submit_fleet(args: argparse.Namespace) -> int:
    """``cuctl submit --fleet HOST:PORT --spec FILE``: a suite of one, here, its results in a new folder."""
    if not args.spec:
        raise ConfigError("cuctl submit --fleet needs --spec FILE", key="spec")
    # The fleet runs the spec as it is written (a suite of one): a flag it would not carry is refused, not lost.
    not_carried = {"prompt": "PROMPT", "from_osworld": "--from-osworld", "seat": "--seat", "screen": "--screen",
               "seat_tags": "--seat-tag", "max_steps": "--max-steps", "max_duration": "--max-duration",
               "max_input_tokens": "--max-input-tokens", "max_output_tokens": "--max-output-tokens",
               "approval": "--approval", "rule": "--rule", "key": "--key", "repeat_limit": "--repeat-limit",
               "cycle_limit": "--cycle-limit", "on_stuck": "--on-stuck"}
    lost = [flag for name, flag in not_carried.items() if getattr(args, name, None) not in (None, False, [])]
    if lost:
        raise ConfigError(f"cuctl submit --fleet runs the spec file as written and takes only --model and --max-cost "
                          f"beside it; {', '.join(lost)} would be lost: put it in the spec (docs/specs.md)",
                          key="fleet", value=lost[0])
    ns = argparse.Namespace(paths=[args.spec], tags=None, repeat=None, model=args.model, out=None, junit=None,
                            from_osworld=False, resume=None, seats=None, detach=False, fleet=args.fleet,
                            json=args.json, max_cost=args.max_cost, retry_errors=None, exclude=[],
                            allow_files_outside=args.allow_files_outside)  # a suite of one: its cap is the task's
    return eval_fleet(ns)


def _detach(args: argparse.Namespace) -> int:
    from ray.job_submission import JobSubmissionClient

    from cud.fleet.job import suite_file

    tags = names(args.tags, "--tags")
    repeat = 1 if args.repeat is None else args.repeat
    planned = plan(args.paths, tags, osworld=args.from_osworld, allow_outside=args.allow_files_outside,
                   exclude=args.exclude, note=say)
    results = new_results(args, planned, tags, repeat)
    job = JOB_PREFIX + results.suite["run"]
    results.suite.update({"fleet": args.fleet, "job": job})
    connect(args.fleet, "cuctl eval --fleet --detach")
    dashboard = _dashboard[-1]
    if not dashboard:
        raise ConfigError("the fleet's head has no dashboard, which Ray's job API needs: start the head with it "
                          "(on a private address)", key="fleet")
    with tempfile.TemporaryDirectory(prefix="cud-fleet-") as upload:
        (Path(upload) / "suite.json").write_text(json.dumps(suite_file(job, results, planned)), encoding="utf-8")
        JobSubmissionClient(f"http://{dashboard}").submit_job(
            entrypoint="python -m cud.fleet.job suite.json", submission_id=job,
            runtime_env={"working_dir": upload})
    if args.json:
        emit_json({"job": job})
    else:
        print(job)
    return 0


def _job(args: argparse.Namespace, with_files: bool = False) -> dict[str, Any]:
    ray = connect(args.fleet, "cuctl fleet")
    from cud.fleet.registry import registry

    kept = ray.get(registry().job_get.remote(args.job, with_files))
    if kept is None:
        raise ConfigError(f"the fleet at {args.fleet} knows no suite {args.job!r} (its head keeps the "
                          f"{KEEP_DONE_JOBS} newest finished suites)", key="job", value=args.job)
    return kept


def status(args: argparse.Namespace) -> int:
    kept = _job(args)
    total = kept["results"]["summary"]["total"] if kept["results"] else None
    runs = kept["results"]["runs"] if kept["results"] else []
    view = {"job": args.job, "done": kept["done"], "summary": total,
            "retries": sum(1 for r in runs if r["attempt"] > 1)}
    if args.json:
        emit_json(view)
    elif total is None:
        print(f"{args.job}: starting")
    else:
        print(f"{args.job}: {'done' if kept['done'] else 'running'} · {total['judged']}/{total['runs']} judged · "
              f"{total['passed']} passing · {total['failed']} failing · {total.get('error', 0)} error · "
              f"{view['retries']} retries")
    return 0


def results(args: argparse.Namespace) -> int:
    kept = _job(args, with_files=True)
    if kept["results"] is None:
        raise ConfigError(f"{args.job} has no results yet", key="job", value=args.job)
    folder = Path(args.out or args.job)
    (folder / "reports").mkdir(parents=True, exist_ok=True)
    (folder / RESULTS_FILE).write_text(json.dumps(kept["results"], indent=1, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
    for name, data in kept["files"].items():
        target = (folder / name).resolve()
        if not target.is_relative_to((folder / "reports").resolve()):
            raise ConfigError(f"{args.job} names a report outside reports/: {name!r}", key="files", value=name)
        target.write_bytes(data)
    return finish(Results.load(folder), folder, args)


def approvals(args: argparse.Namespace) -> int:
    connect(args.fleet, "cuctl fleet approvals")
    from cud.fleet.nodes import fleet_nodes, node_call

    pending = [{**a, "node": name} for name in sorted(fleet_nodes()) for a in node_call(name, "approvals")]
    if args.json:
        emit_json(pending)
        return 0
    table(["NODE:ID", "TASK", "SEAT", "KIND", "CREATED", "WHAT"],
          [[f"{a['node']}:{row[0]}", *row[1:]] for a, row in zip(pending, approval_rows(pending), strict=True)])
    return 0


def _target(text: str) -> tuple[str, int]:
    name, _, number = text.rpartition(":")
    if not name or not number.isdigit():
        raise ConfigError(f"an approval across the fleet is NODE:ID, got {text!r}", key="id", value=text)
    return name, int(number)


def approve(args: argparse.Namespace) -> int:
    connect(args.fleet, "cuctl fleet approve")
    from cud.fleet.nodes import node_call

    name, number = _target(args.id)
    done = node_call(name, "approve", id=number)
    emit_json(done) if args.json else print(f"approval {args.id} approved (task {done['task_id']} on {name})")
    return 0


def deny(args: argparse.Namespace) -> int:
    connect(args.fleet, "cuctl fleet deny")
    from cud.fleet.nodes import node_call

    name, number = _target(args.id)
    done = node_call(name, "deny", id=number, reason=args.reason)
    emit_json(done) if args.json else print(f"approval {args.id} denied (task {done['task_id']} on {name})")
    return 0
