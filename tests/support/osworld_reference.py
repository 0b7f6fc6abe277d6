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

import lxml.etree

__all__ = ("STUBBED", "FakeVm", "address_bar", "reference", "reference_getter", "reference_modules")

PACKAGE = "desktop_env.evaluators.metrics"
GETTERS = "desktop_env.evaluators.getters"

#: Top-level imports of OSWorld's metric modules that bring a deep-learning or media stack (or are
#: unmaintained); stood in for when absent. Extend it for a module that imports another.
STUBBED: frozenset[str] = frozenset({
    "easyocr", "torch", "cv2", "librosa", "acoustid", "fastdtw", "borb", "mutagen", "imagehash",
    "pydrive",  # the getters' Google Drive client (getters/chrome.py imports it at the top)
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
def _bare_package(dotted: str) -> Path:
    """The folder of ``dotted`` (a package of desktop_env.evaluators), put in ``sys.modules`` without its
    ``__init__``."""
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("desktop-env is not installed: `make setup` installs it (--no-deps) for these tests")
    folder = Path(next(iter(spec.submodule_search_locations))).joinpath(*dotted.split(".")[1:])
    if dotted not in sys.modules:
        importlib.import_module("desktop_env.evaluators")  # a comment only; the metrics' __init__ is the heavy one
        package = types.ModuleType(dotted)
        package.__path__ = [str(folder)]
        package.__package__ = dotted
        package.__spec__ = importlib.machinery.ModuleSpec(dotted, None, is_package=True)
        package.__spec__.submodule_search_locations = [str(folder)]
        sys.modules[dotted] = package
    if not any(isinstance(finder, _StubFinder) for finder in sys.meta_path):
        sys.meta_path.append(_StubFinder())
    return folder


def _metrics_folder() -> Path:
    return _bare_package(PACKAGE)


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


def reference_getter(module: str, name: str) -> Callable[..., Any]:
    """OSWorld's own getter ``name`` (``get_…``) from ``desktop_env/evaluators/getters/MODULE.py``, loaded without
    the getters' ``__init__`` (which imports every getter module)."""
    _bare_package(GETTERS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = importlib.import_module(f"{GETTERS}.{module}")
    function: Callable[..., Any] = getattr(loaded, name)
    return function


def address_bar(url: str) -> str:
    """The accessibility tree OSWorld's Chrome getters read the address bar from, holding ``url``."""
    root = lxml.etree.Element("desktop-frame")
    app = lxml.etree.SubElement(root, "application", name="Google Chrome")
    lxml.etree.SubElement(app, "entry", name="Address and search bar").text = url
    return lxml.etree.tostring(root, encoding="unicode")


class FakeVm:
    """OSWorld's ``env`` as its getters use it, answered from what a test gives: the platform, ``cache_dir``,
    and the controller's ``get_file`` (a file's bytes by path, None for one the VM lacks; ``content`` answers
    every path), ``execute_python_command`` (the path a getter asks the VM for, e.g. Chrome's profile file)
    and ``get_accessibility_tree``."""

    vm_platform = "Linux"
    vm_machine = "x86_64"

    def __init__(self, *, files: dict[str, bytes] | None = None, content: bytes | None = None, asked: str = "",
                 tree: str = "", cache_dir: str = "") -> None:
        self.controller = self  # the getters call env.controller.…
        self.files, self.content, self.asked, self.tree, self.cache_dir = files, content, asked, tree, cache_dir

    def get_file(self, path: str) -> bytes | None:
        return self.files.get(path) if self.files is not None else self.content

    def execute_python_command(self, command: str) -> dict[str, str]:
        return {"output": self.asked + "\n"}

    def get_accessibility_tree(self) -> str:
        return self.tree
