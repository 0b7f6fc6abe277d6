"""The judge: one OSWorld metric run in a process of its own, ``python -I -m cud.osworld.judge``.

It reads one JSON object from stdin::

    {"metric": "compare_table", "result": ARG, "expected": ARG or null, "options": {...}}

where ARG is ``{"path": "/abs/file"}`` (the path string OSWorld's functions take),
``{"paths": ["/abs/file", null, ...]}`` (a list of them, as OSWorld's multi file getters give, None for a
file that is not there), ``{"value": <json>}`` (the value itself) or ``{"none": "why"}`` (None, as OSWorld's getters give
for a file that is not there). It writes one JSON object to stdout, ``{"score": 1.0}`` or
``{"error": "..."}`` (a bad request, a metric that raised: the message names the files), and
exits 0 either way; any other exit is a crash. The metric is called as OSWorld's
``DesktopEnv.evaluate`` calls it: ``metric(result, expected, **options)``, without ``expected``
when it is absent or null. A document is parsed only here, so whatever it does to a parser
happens in a process that ends with the verdict.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from cud.errors import SpecError
from cud.osworld.catalog import check_options

__all__ = ("MAX_REQUEST_BYTES", "judge", "main")

#: The request is a metric name, options and paths or values; a value beyond this is not a judge's job.
MAX_REQUEST_BYTES = 16 * 1024 * 1024

_REQUEST_KEYS = frozenset({"metric", "result", "expected", "options"})


class _BadRequest(Exception):
    pass


def _argument(request: Mapping[str, Any], key: str) -> tuple[Any, str | None]:
    """The value an ARG stands for, and its path if it is one (for error messages)."""
    arg = request[key]
    if not isinstance(arg, dict) or len(arg) != 1 or next(iter(arg)) not in ("path", "paths", "value", "none"):
        raise _BadRequest(f"{key} must be one of {{\"path\": ...}}, {{\"paths\": [...]}}, {{\"value\": ...}}, "
                          f"{{\"none\": ...}}, not {arg!r:.200}")
    kind, value = next(iter(arg.items()))
    if kind == "path":
        if not isinstance(value, str) or not value.startswith("/"):
            raise _BadRequest(f"{key}.path must be an absolute path, not {value!r:.200}")
        return value, value
    if kind == "paths":
        if not isinstance(value, list) or not all(p is None or isinstance(p, str) and p.startswith("/") for p in value):
            raise _BadRequest(f"{key}.paths must be a list of absolute paths (or null), not {value!r:.200}")
        return value, ", ".join(p for p in value if p is not None) or None
    if kind == "value":
        return value, None
    return None, None


def judge(request: object) -> dict[str, object]:
    """The answer to one parsed request: ``{"score": x}`` or ``{"error": message}``."""
    try:
        if not isinstance(request, dict):
            raise _BadRequest(f"the request must be a JSON object, not {type(request).__name__}")
        unknown = sorted(set(request) - _REQUEST_KEYS)
        if unknown:
            raise _BadRequest(f"unknown request key(s) {', '.join(map(repr, unknown))} "
                              f"(known: {', '.join(sorted(_REQUEST_KEYS))})")
        name = request.get("metric")
        if not isinstance(name, str):
            raise _BadRequest(f"metric must be a metric's name, not {name!r:.200}")
        options = request.get("options", {})
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise _BadRequest(f"options must be a JSON object, not {options!r:.200}")
        check_options(name, options, "options")
        if "result" not in request:
            raise _BadRequest("result is missing")
        args = [_argument(request, "result")]
        if request.get("expected") is not None:
            args.append(_argument(request, "expected"))
    except (_BadRequest, SpecError) as exc:
        return {"error": str(exc)}
    return _run(name, [value for value, _ in args], options, [(key, path) for key, (_, path) in
                                                               zip(("result", "expected"), args, strict=False)])


def _run(name: str, args: list[Any], options: dict[str, Any], paths: list[tuple[str, str | None]]) -> dict[str, object]:
    files = "; ".join(f"{key}: {path}" for key, path in paths if path is not None)
    about = f" ({files})" if files else ""
    try:
        from cud.osworld.metrics import metric
        function = metric(name)
    except ImportError as exc:
        return {"error": f"metric {name!r} cannot be loaded (is the cud[osworld] extra installed?): {exc}"}
    except KeyError:
        return {"error": f"metric {name!r} has no implementation in cud.osworld.metrics"}
    try:
        # OSWorld's metrics print as they go; stdout carries the one answer, so their prints go to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            score = function(*args, **options)
    except Exception as exc:  # whatever a metric raises on a file is the verdict's error
        return {"error": f"{name} raised {type(exc).__name__}: {exc}{about}"}
    # float() as OSWorld's evaluate takes the score: a bool, an int, a numpy number all count.
    if not isinstance(score, (str, bytes)) and hasattr(score, "__float__"):
        value = float(score)
        if math.isfinite(value):
            return {"score": value}
    return {"error": f"{name} returned {score!r:.200}, not a finite number{about}"}


def main() -> int:
    # The answer's channel is a copy of stdout; fd 1 itself goes to stderr, so nothing a library writes
    # there, even from C, mixes into the one JSON answer.
    sys.stdout.flush()
    answer_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    data = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        answer: dict[str, object] = {"error": f"the request is larger than {MAX_REQUEST_BYTES} bytes"}
    else:
        try:
            request = json.loads(data)
        except ValueError as exc:
            answer = {"error": f"the request is not JSON: {exc}"}
        else:
            answer = judge(request)
    with answer_out:
        answer_out.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
