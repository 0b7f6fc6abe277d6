"""No import circles among cud's modules.

The graph is read from the source with ``ast`` (nothing is imported), under the
names the modules are installed as (pyproject's package-dir: ``daemon/`` is
``cud.daemon``, ``drivers/`` is ``cud.drivers``). Every import counts, at the top
or inside a function: a function-level import only postpones the circle to the
first call, and still ties the two modules into one concern. Imports under
``if TYPE_CHECKING:`` do not run and are left out.

The sandbox's scripts (``sandbox/*.py``, run as scripts and importing each
other by bare name) are checked the same way, as their own graph.

``python tests/test_import_graph.py`` prints every circle found (exit status 1 if any).
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


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, at any depth (functions included, TYPE_CHECKING blocks not)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
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


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the known modules it imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
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
            for target in targets:
                known = _resolve(modules, target)
                if known is not None and known != name:
                    edges.add(known)
        graph[name] = edges
    return graph


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
    modules = {}
    for file, text in sources.items():
        (package / file).write_text(text)
        modules["pkg" if file == "__init__.py" else f"pkg.{file[:-3]}"] = package / file
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


if __name__ == "__main__":
    found = [circle for graph in (import_graph(package_modules()), import_graph(sandbox_modules()))
             for circle in cycles(graph)]
    for circle in found:
        print(" <-> ".join(circle))
    sys.exit(1 if found else 0)
