"""``python -m cud.fleet.job SUITE.json``: a detached suite (``cuctl eval --fleet … --detach``), run on the head as a
Ray job (needs Ray).

SUITE.json (in the job's working_dir, uploaded by cuctl) holds the job's id, results.json's
``suite`` and every spec as a spec file gives it with its files in base64. The suite runs here
with :class:`cud.fleet.suite.FleetSuite` into a private temporary folder; each change is kept in
the fleet registry under the job's id with the reports made so far, so ``cuctl fleet status|results
JOB`` read it from anywhere that reaches the head, and a submitter that went away loses nothing.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from cud.fleet import NAMESPACE, need_ray
from cud.fleet.registry import registry
from cud.fleet.suite import FleetSuite
from cud.spec import parse_spec
from cud.suite.plan import Planned
from cud.suite.results import RESULTS_FILE, Results

__all__ = ("main", "suite_file")

ray = need_ray("a detached fleet suite")


def suite_file(job: str, results: Results, planned: list[Planned]) -> dict[str, Any]:
    """What cuctl uploads: the job's id, the suite, and each spec with its files."""
    return {"job": job, "suite": results.suite,
            "specs": {p.name: {"spec": p.spec.to_dict(),
                               "files": {n: base64.b64encode(d).decode("ascii") for n, d in p.files.items()}}
                      for p in planned}}


def main(argv: list[str] | None = None) -> int:
    path = Path((argv or sys.argv[1:])[0])
    data = json.loads(path.read_text(encoding="utf-8"))
    ray.init(address="auto", namespace=NAMESPACE, log_to_driver=False)
    book = registry()
    planned = {name: Planned(name, Path(name), parse_spec(entry["spec"]),
                             {n: base64.b64decode(d) for n, d in entry["files"].items()})
               for name, entry in data["specs"].items()}
    folder = Path(tempfile.mkdtemp(prefix="cud-fleet-job-"))
    sent: set[str] = set()

    def keep(_: Results, done: bool = False) -> None:
        new = {str(p.relative_to(folder)): p.read_bytes() for p in (folder / "reports").iterdir()
               if str(p.relative_to(folder)) not in sent}
        sent.update(new)
        kept = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
        ray.get(book.job_put.remote(data["job"], kept, new, done))

    try:
        (folder / "reports").mkdir()
        results = Results(data["suite"])
        results.save(folder)
        FleetSuite(results, planned, folder, keep).run()
        keep(results, done=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
