"""OSWorld's own metric functions, the reference the differential tests hold cud's ports to.

desktop-env (installed ``--no-deps`` by ``make setup``) keeps its metrics in
``desktop_env/evaluators/metrics/``; that package's ``__init__`` imports every module, and with
them easyocr, torch, cv2, librosa... To load one function without it, the package is put in
``sys.modules`` as a bare module whose ``__path__`` is the real folder: its submodules then import
as usual (``from desktop_env.evaluators.metrics.utils import ...``, ``from .utils import ...``)
and the ``__init__`` never runs. Which module holds a name is read from that ``__init__``'s
``from .module import (...)`` lines with ``ast``.

Imports that cannot be installed light (:data:`STUBBED`) are served, only when not installed, by
stand-in modules whose every attribute raises when called, so a module that imports them at the
top still loads and a function that uses them fails loudly instead of judging wrongly.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ("STUBBED", "reference", "reference_modules")

PACKAGE = "desktop_env.evaluators.metrics"

#: Top-level imports of OSWorld's metric modules that bring a deep-learning or media stack (or are
#: unmaintained); stood in for when absent. Extend it for a module that imports another.
STUBBED: frozenset[str] = frozenset({
    "easyocr", "torch", "cv2", "librosa", "acoustid", "fastdtw", "borb", "mutagen", "imagehash",
})


class _Unavailable:
    """Any attribute of a stood-in module: itself again, and raising when called or used as a value."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> _Unavailable:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Unavailable(f"{self._name}.{attr}")

    def __call__(self, *args: object, **kwargs: object) -> Any:
        raise RuntimeError(f"{self._name} is not installed for the OSWorld reference (tests/support/osworld_reference.py)")


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Unavailable(f"{self.__name__}.{attr}")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves :data:`STUBBED` roots and their submodules; last on the meta path, so installed ones win."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in STUBBED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


@functools.cache
def _metrics_folder() -> Path:
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("desktop-env is not installed: `make setup` installs it (--no-deps) for these tests")
    folder = Path(next(iter(spec.submodule_search_locations))) / "evaluators" / "metrics"
    if PACKAGE not in sys.modules:
        importlib.import_module("desktop_env.evaluators")  # a comment only; the metrics' __init__ is the heavy one
        package = types.ModuleType(PACKAGE)
        package.__path__ = [str(folder)]
        package.__package__ = PACKAGE
        package.__spec__ = importlib.machinery.ModuleSpec(PACKAGE, None, is_package=True)
        package.__spec__.submodule_search_locations = [str(folder)]
        sys.modules[PACKAGE] = package
    if not any(isinstance(finder, _StubFinder) for finder in sys.meta_path):
        sys.meta_path.append(_StubFinder())
    return folder


@functools.cache
def reference_modules() -> dict[str, str]:
    """Each metric name the package's ``__init__`` exports, and the module (``table``, ``general``...) it is in."""
    tree = ast.parse((_metrics_folder() / "__init__.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found


def reference(name: str) -> Callable[..., Any]:
    """OSWorld's own metric ``name``, loaded from its module without the package's ``__init__``."""
    module_name = reference_modules().get(name)
    if module_name is None:
        raise KeyError(f"desktop-env's metrics export no {name!r}")
    with warnings.catch_warnings():
        # Their imports warn (PyPDF2's deprecation...), which pytest here would make errors.
        warnings.simplefilter("ignore")
        module = importlib.import_module(f"{PACKAGE}.{module_name}")
    function: Callable[..., Any] = getattr(module, name)
    return function


def reference_getter(module_name: str, name: str) -> Callable[..., Any]:
    """OSWorld's own getter ``name`` of ``getters/<module_name>.py``, loaded from its file without the getters'
    ``__init__`` (which imports every getter's libraries)."""
    folder = _metrics_folder().parent / "getters"
    spec = importlib.util.spec_from_file_location(f"_osworld_getters_{module_name}", folder / f"{module_name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function: Callable[..., Any] = getattr(module, name)
    return function
