"""OSWorld's metric functions, ported: each catalog name's function, imported only when asked for.

The modules here are OSWorld's ``desktop_env/evaluators/metrics`` (Apache-2.0; desktop-env 1.0.2
from PyPI is the reference) with their logic kept and their heavy imports (easyocr, torch, cv2...)
left out; the differential tests hold each to OSWorld's own function. They need the
``cud[osworld]`` extra and run in the judge's process (:mod:`cud.osworld.judge`), never in the
daemon: importing this package imports none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

__all__ = ("FUNCTIONS", "metric")

#: Each metric's ``"module:function"`` under this package; every name is in cud.osworld.catalog.METRICS.
FUNCTIONS: Mapping[str, str] = MappingProxyType({
})


def metric(name: str) -> Callable[..., Any]:
    """The function of metric ``name`` (KeyError if there is none), importing its module now."""
    module_name, _, function_name = FUNCTIONS[name].partition(":")
    module = importlib.import_module(f"{__name__}.{module_name}")
    function: Callable[..., Any] = getattr(module, function_name)
    return function
