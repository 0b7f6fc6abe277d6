"""The verdict of a spec's checks, and the files its ``collect`` keeps with the task's record.

The verdict is :func:`cud.outcome.verdict_outcome` of its checks by the spec's ``pass_if``. With
``all`` (the default): ``failed`` when any check failed, else ``error`` when any could not look, else
``passed``; its ``score`` is the weighted fraction of checks that passed (weights default to 1). With
``any``: ``passed`` when any check passed, else ``failed`` when any failed, else ``error``; its
``score`` is the best single check's own (1.0 when one passed, else 0.0: a weight only says how a
check counts among all of them). A task without checks has no verdict. The model's own word counts
only through an ``answer`` check, and the spec's ``fail_if_answer``: a final message it matches makes
the verdict ``failed`` (score 0) whatever the checks say.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cud.daemon.spec.checks import cut
from cud.daemon.store.trajectory import Trajectories
from cud.daemon.store.writes import now_iso
from cud.errors import CudError, StorageFull
from cud.outcome import outcome_of_check, verdict_outcome
from cud.protocol import ArtifactView, CheckResultView, VerdictView
from cud.spec import Spec

if TYPE_CHECKING:
    from cud.daemon.session.processes import SeatSession

__all__ = ("MAX_ARTIFACT_BYTES", "MAX_ARTIFACTS_BYTES", "answer_failed", "collect", "judge")

#: The largest file ``collect`` keeps, and all of a task's collected files together.
MAX_ARTIFACT_BYTES = 16 * 1024 * 1024
MAX_ARTIFACTS_BYTES = 64 * 1024 * 1024


def judge(results: Sequence[CheckResultView], state: str, pass_if: str = "all", *,
          answer_failed: str | None = None) -> VerdictView | None:
    """The verdict of ``results``, the checks of a task whose model part ended in ``state``, combined by the
    spec's ``pass_if``; None without checks. ``answer_failed``: why the final message fails it (the spec's
    ``fail_if_answer`` matched), its score then 0."""
    if not results:
        return None
    outcomes = [outcome_of_check(r) for r in results]
    verdict = verdict_outcome(outcomes, pass_if, answer_fails=answer_failed is not None)
    assert verdict is not None  # there are results
    if answer_failed is not None:
        score = 0.0
    elif pass_if == "any":
        score = 1.0 if "passed" in outcomes else 0.0
    else:
        total = sum(r["weight"] for r in results)
        score = sum(r["weight"] for r, o in zip(results, outcomes, strict=True) if o == "passed") / total
    view: VerdictView = {"verdict": verdict, "score": round(score, 6), "passed": outcomes.count("passed"),
                         "failed": outcomes.count("failed"), "errors": outcomes.count("error"), "state": state,
                         "checks": list(results), "at": now_iso(), "pass_if": pass_if}
    if answer_failed is not None:
        view["answer_failed"] = answer_failed
    return view


def answer_failed(spec: Spec, final_message: str | None) -> str | None:
    """Why the final message fails the verdict (it matches the spec's ``fail_if_answer``), or None. No final
    message declares nothing: OSWorld's runner makes its FAIL action only of a message."""
    want = spec.fail_if_answer
    if want is None or final_message is None or not want.test(final_message):
        return None
    return f"the final message {want.describe()} (fail_if_answer): {cut(final_message, 80)!r}"


async def collect(session: SeatSession | None, paths: Sequence[str], trajectories: Trajectories,
                  task_id: int) -> list[ArtifactView]:
    """Read each path from the seat's home into the task's record; a file that cannot be kept says why."""
    kept: list[ArtifactView] = []
    total = 0
    for path in paths:
        try:
            if session is None:
                raise CudError("this seat has no session (its user and home are not configured)")
            data = await session.read_file(path, max_bytes=MAX_ARTIFACT_BYTES)
            if total + len(data) > MAX_ARTIFACTS_BYTES:
                raise CudError(f"the task's collected files would pass {MAX_ARTIFACTS_BYTES} bytes together "
                               f"(MAX_ARTIFACTS_BYTES)")
            trajectories.save_artifact(task_id, path, data)
        except StorageFull:
            raise
        except CudError as exc:
            kept.append({"path": path, "bytes": 0, "sha256": None, "error": exc.message})
            continue
        except OSError as exc:  # the home changed under the read, or a path that is a folder of another one
            kept.append({"path": path, "bytes": 0, "sha256": None,
                         "error": f"could not look: {exc.strerror or exc} at {path!r}"})
            continue
        total += len(data)
        kept.append({"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "error": None})
    return kept
