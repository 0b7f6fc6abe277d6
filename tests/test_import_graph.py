"""No import circles among cud's modules.

The graph is read from the source with ``ast`` (nothing is imported), under the
names the modules are installed as (pyproject's package-dir: ``daemon/`` is
``cud.daemon``, ``drivers/`` is ``cud.drivers``). Every import counts, at the top
or inside a function: a function-level import only postpones the circle to the
first call, and still ties the two modules into one concern. Imports under
``if TYPE_CHECKING:`` do not run and are left out.

The sandbox's scripts (``sandbox/*.py``, run as scripts and importing each
other by bare name) are checked the same way, as their own graph.

Arrows point one way, too: every module of the package is in one layer
(:data:`PLACES`), and a layer imports only the layers :data:`MAY_IMPORT` names.
The daemon and the clients meet in the shared library and never import each
other; nothing below them imports either. Here imports under ``TYPE_CHECKING``
count as well: a type borrowed from a higher layer still ties the lower one to it.

``python tests/test_import_graph.py`` prints every circle and every arrow pointing
the wrong way (exit status 1 if any).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where each installed package's source lives (pyproject.toml's [tool.setuptools] package-dir).
PACKAGE_DIRS = {"cud": ROOT / "cud", "cud.daemon": ROOT / "daemon", "cud.drivers": ROOT / "drivers"}


def package_modules() -> dict[str, Path]:
    """Every module of the installed package, by its dotted name."""
    modules: dict[str, Path] = {}
    for package, directory in PACKAGE_DIRS.items():
        for path in directory.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            relative = path.relative_to(directory).with_suffix("")
            parts = [p for p in relative.parts if p != "__init__"]
            modules[".".join([package, *parts])] = path
    return modules


def sandbox_modules() -> dict[str, Path]:
    return {path.stem: path for path in (ROOT / "sandbox").glob("*.py")}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, type_checking: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, at any depth (functions included; TYPE_CHECKING blocks if asked)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def _resolve(modules: dict[str, Path], name: str) -> str | None:
    """The known module ``name`` is, or the nearest known package above it."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_lines(modules: dict[str, Path], type_checking: bool = False) -> dict[str, list[tuple[str, int, str]]]:
    """module -> (the known module, line, statement) of each import (``from pkg import mod`` imports ``pkg.mod``)."""
    found: dict[str, list[tuple[str, int, str]]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        source = path.read_text()
        edges: list[tuple[str, int, str]] = []
        for node in _imports(ast.parse(source, str(path)), type_checking):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                    base = ".".join([*anchor, *([base] if base else [])])
                # ``from cud.cuctl import ssh`` imports the module cud.cuctl.ssh; ``from x import name`` imports x.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            statement = " ".join((ast.get_source_segment(source, node) or "").split())
            for target in dict.fromkeys(targets):
                known = _resolve(modules, target)
                if known is not None and known != name:
                    edges.append((known, node.lineno, statement))
        found[name] = edges
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the known modules it imports (imports that run: TYPE_CHECKING blocks left out)."""
    return {name: {target for target, _, _ in edges} for name, edges in import_lines(modules).items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each sorted, as a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        # Iterative, so a deep chain of imports cannot hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


# -- layers ------------------------------------------------------------------------------------
#: The layer of each module of the package: an exact name, or ``pkg.*`` for a package and everything
#: under it; the most specific entry wins. A module that matches none fails the test: place it.
PLACES: dict[str, str] = {
    # What every layer uses: the package's version, the error hierarchy, giving a heap's freed memory back.
    "cud": "base",
    "cud.errors": "base",
    "cud.heap": "base",
    # The displays (X11, VNC): they know nothing of tasks, sockets or clients.
    "cud.drivers.*": "drivers",
    # The shared library: the words daemon and clients both speak.
    "cud.protocol.*": "shared",
    "cud.phrases.*": "shared",
    "cud.model_api.*": "shared",
    # Open models' formats: their answers become the drivers' actions, checked against the drivers' key table.
    "cud.model_api.chat.*": "formats",
    "cud.spec.*": "shared",
    # The metrics' catalog: the names a spec's metric check may use (light; cud.spec reads it).
    "cud.osworld.catalog": "shared",
    "cud.budget": "shared",
    "cud.seat_needs": "shared",
    "cud.suggest": "shared",
    "cud.outcome": "shared",
    # ... and its old import paths, kept for compatibility.
    "cud.requests": "shared",
    "cud.request_checks": "shared",
    "cud.views": "shared",
    "cud.target_phrases": "shared",
    "cud.request_limits": "shared",
    # OSWorld: its task files converted to specs, its metrics, and the judge the daemon runs as a
    # process of its own. Above the spec library (it makes specs); cud.spec never imports it.
    "cud.osworld.*": "osworld",
    # The daemon: its rooms and the service that ties them.
    "cud.daemon.*": "daemon",
    # The clients: cuctl, the console, the report, a suite, the fleet on Ray, the scripted model.
    "cud.cuctl.*": "clients",
    "cud.console.*": "clients",
    "cud.record.*": "clients",
    "cud.suite.*": "clients",
    "cud.fleet.*": "clients",
    "cud.scripted.*": "clients",
    # The command lines that wire both sides: ``cud`` itself, and ``cud fleet join``'s agent and
    # watcher, which are clients of their own daemon (over its socket) and of Ray.
    "cud.daemon.main": "commands",
    "cud.daemon.fleet.cli": "commands",
    "cud.daemon.fleet.agent": "commands",
    "cud.daemon.fleet.watch": "commands",
}

#: What each layer may import, its own layer included. The daemon and the clients are peers: they
#: meet in the shared library and never import each other.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "base": frozenset({"base"}),
    "drivers": frozenset({"base", "drivers"}),
    "shared": frozenset({"base", "shared"}),
    "formats": frozenset({"base", "drivers", "shared", "formats"}),
    "osworld": frozenset({"base", "shared", "osworld"}),
    "daemon": frozenset({"base", "drivers", "shared", "formats", "osworld", "daemon"}),
    "clients": frozenset({"base", "drivers", "shared", "formats", "osworld", "clients"}),
    "commands": frozenset({"base", "drivers", "shared", "formats", "osworld", "daemon", "clients", "commands"}),
}


def layer_of(name: str, places: dict[str, str] = PLACES) -> str | None:
    """The layer of module ``name``: its own entry, else the nearest ``pkg.*`` above it; None if unplaced."""
    if name in places:
        return places[name]
    package = name
    while package:
        if f"{package}.*" in places:
            return places[f"{package}.*"]
        package = package.rpartition(".")[0]
    return None


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def wrong_way(modules: dict[str, Path], places: dict[str, str] = PLACES,
              may_import: dict[str, frozenset[str]] = MAY_IMPORT) -> list[str]:
    """Every module no layer holds, and every import from a layer to one it may not import, as a line each."""
    found = [f"{name} ({_shown(modules[name])}) is in no layer: add it to PLACES"
             for name in sorted(modules) if layer_of(name, places) is None]
    for name, edges in sorted(import_lines(modules, type_checking=True).items()):
        layer = layer_of(name, places)
        for target, line, statement in sorted(edges, key=lambda edge: (edge[1], edge[0])):
            target_layer = layer_of(target, places)
            if layer is not None and target_layer is not None and target_layer not in may_import[layer]:
                found.append(f"{_shown(modules[name])}:{line}: {name} ({layer}) imports {target} ({target_layer}): "
                             f"{statement}")
    return found


def _write_package(package: Path, sources: dict[str, str]) -> dict[str, Path]:
    """A made-up package for testing the checker: its files written, its modules by name."""
    modules = {}
    for file, text in sources.items():
        (package / file).write_text(text)
        modules["pkg" if file == "__init__.py" else f"pkg.{file[:-3]}"] = package / file
    return modules


def test_the_checker_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    # The checker itself: a circle made only by an import inside a function, one
    # through ``from package import module``, and a relative one are all found;
    # a TYPE_CHECKING import and a one-way chain are not circles.
    package = tmp_path / "pkg"
    package.mkdir()
    sources = {
        "__init__.py": "",
        "a.py": "from pkg.b import thing\n",
        "b.py": "def f():\n    from pkg import a\n",
        "c.py": "from . import d\n",
        "d.py": "from .c import x\n",
        "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import f\n",
        "f.py": "import pkg.e\nimport pkg.a\n",
    }
    modules = _write_package(package, sources)
    assert cycles(import_graph(modules)) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


def test_no_import_circle_in_the_package() -> None:
    graph = import_graph(package_modules())
    assert len(graph) > 50  # the walk found the tree (a wrong root would find nothing and pass)
    assert "cud.cuctl.ssh" in graph["cud.cuctl.dial"]  # function-level imports are edges
    assert cycles(graph) == []


def test_no_import_circle_in_the_sandbox_scripts() -> None:
    graph = import_graph(sandbox_modules())
    assert "procs" in graph["sandboxctl"]
    assert cycles(graph) == []


def test_the_checker_finds_an_arrow_pointing_the_wrong_way(tmp_path: Path) -> None:
    # A low module importing a high one is named with its line, a TYPE_CHECKING one too; a
    # module in no layer is named; downward imports and a peer's own layer pass.
    package = tmp_path / "pkg"
    package.mkdir()
    sources = {
        "__init__.py": "",
        "low.py": "import os\n\ndef f():\n    from pkg.high import thing\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import high\n",
        "high.py": "from pkg import low\nfrom pkg.peer import x\n",
        "peer.py": "",
        "stray.py": "from pkg import low\n",
    }
    modules = _write_package(package, sources)
    places = {"pkg": "low", "pkg.low": "low", "pkg.typed": "low", "pkg.high": "high", "pkg.peer": "high"}
    may_import = {"low": frozenset({"low"}), "high": frozenset({"low", "high"})}
    assert wrong_way(modules, places, may_import) == [
        f"pkg.stray ({package / 'stray.py'}) is in no layer: add it to PLACES",
        f"{package / 'low.py'}:4: pkg.low (low) imports pkg.high (high): from pkg.high import thing",
        f"{package / 'typed.py'}:3: pkg.typed (low) imports pkg.high (high): from pkg import high",
    ]
    assert layer_of("pkg.peer.deep", {"pkg.peer.*": "high", "pkg.*": "low"}) == "high"


def test_every_arrow_points_down_or_within_a_layer() -> None:
    modules = package_modules()
    assert layer_of("cud.daemon.tasks.runner") == "daemon" and layer_of("cud.daemon.main") == "commands"
    assert set(PLACES.values()) == set(MAY_IMPORT)
    stale = [place for place in PLACES if not any(name == place or name.startswith(place[:-1]) for name in modules)]
    assert stale == [], "PLACES names modules that no longer exist"
    arrows = wrong_way(modules)
    assert arrows == [], "arrows that point the wrong way (see PLACES and MAY_IMPORT):\n" + "\n".join(arrows)


if __name__ == "__main__":
    found = [circle for graph in (import_graph(package_modules()), import_graph(sandbox_modules()))
             for circle in cycles(graph)]
    for circle in found:
        print(" <-> ".join(circle))
    arrows = wrong_way(package_modules())
    print(*arrows, sep="\n")
    sys.exit(1 if found or arrows else 0)
