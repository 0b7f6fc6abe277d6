"""The seam a model API plugs into (daemon/tasks/checkpoint.py), and rules written once.

Read from the source with ``ast`` (nothing is imported). A second model API is a module
beside ``openai_computer.py`` that calls the same checkpoint: so only adapters may import a
model API's SDK, the checkpoint's docstring must name every call an adapter makes, and the
words and sets every adapter relies on are defined in one place each.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "daemon" / "tasks"
#: The model APIs' adapters: the only modules of daemon/tasks/ that know an API's SDK.
ADAPTERS = {"openai_computer.py", "anthropic_computer.py", "chat_computer.py"}
#: The SDKs of model APIs (and their clients' HTTP library).
SDKS = ("openai", "anthropic", "httpx")


def _runtime_imports(path: Path) -> set[str]:
    """Every module ``path`` imports outside ``if TYPE_CHECKING:`` (annotations only need the name)."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text())]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        pending.extend(ast.iter_child_nodes(node))
    return found


def test_only_an_adapter_imports_a_model_apis_sdk() -> None:
    modules = sorted(TASKS.glob("*.py"))
    assert {p.name for p in modules} >= {"runner.py", "checkpoint.py", "ledger.py", *ADAPTERS}
    for path in modules:
        sdk = sorted(m for m in _runtime_imports(path) if m.split(".")[0] in SDKS)
        if path.name in ADAPTERS:
            assert sdk, f"{path.name}: an adapter that imports no SDK is not one"
        else:
            assert sdk == [], f"daemon/tasks/{path.name} imports {sdk}: only an API's adapter may"


def test_the_checkpoint_says_every_call_an_adapter_makes() -> None:
    tree = ast.parse((TASKS / "checkpoint.py").read_text())
    doc = ast.get_docstring(tree) or ""
    checkpoint = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Checkpoint")
    public = [n.name for n in checkpoint.body
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith("_")]
    assert len(public) >= 8
    missing = [name for name in public if f":meth:`{name}`" not in doc]
    assert missing == [], f"checkpoint.py's docstring does not tell an adapter when to call {missing}"
    # An adapter calls each one it needs; the adapter of OpenAI's computer tool needs them all but
    # ``close``, which the runner calls after any adapter's loop, and ``admit_or_cancel``, for the loops cud runs
    # itself (the SDK's toolset takes admit's False as it is).
    # (Both hand their actions and screenshots to the shared RecordingDriver, which reports them.)
    shared = (TASKS / "recording.py").read_text()
    adapter = (TASKS / "openai_computer.py").read_text() + shared
    assert [name for name in public if f"checkpoint.{name}" not in adapter] == ["admit_or_cancel", "close"]
    assert "self.checkpoint.close()" in (TASKS / "runner.py").read_text()
    # Anthropic's tool sends no safety checks: its adapter never asks for a batch.
    anthropic = (TASKS / "anthropic_computer.py").read_text() + shared
    assert [name for name in public if f"checkpoint.{name}" not in anthropic
            and f"_checkpoint.{name}" not in anthropic] == ["approve_batch", "close"]


def test_every_api_has_one_adapter_with_the_same_three_names() -> None:
    from cud.daemon.model.table import APIS
    from cud.daemon.tasks.adapters import ADAPTERS as BY_API
    from cud.daemon.tasks.adapters import adapter_for

    assert set(BY_API) == set(APIS)
    assert {module.rsplit(".", 1)[1] + ".py" for module in BY_API.values()} == ADAPTERS
    for api in APIS:
        adapter = adapter_for(api)
        assert callable(adapter.run_model) and callable(adapter.error_of) and adapter.API_ERRORS
    # The runner picks the adapter and names none.
    runner = (TASKS / "runner.py").read_text()
    assert "adapter_for(" in runner and "openai_computer" not in runner and "anthropic_computer" not in runner


def _string_collections(path: Path) -> list[tuple[int, set[str]]]:
    """Collections of strings written out in ``path``, but a module's ``__all__`` (names, not values: a module of
    action builders exports functions called click, move and scroll)."""
    found = []
    tree = ast.parse(path.read_text())
    exported = {id(node.value) for node in tree.body if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)}
    for node in ast.walk(tree):
        if id(node) in exported:
            continue
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)) and node.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            found.append((node.lineno, {e.value for e in node.elts if isinstance(e, ast.Constant)}))
    return found


def test_sets_of_action_types_are_written_in_one_place() -> None:
    # POINTER_ACTIONS, AT_POINT_ACTIONS, HUMAN_ACTIONS: one module; everyone else imports them.
    home = ROOT / "cud" / "protocol" / "request_checks.py"
    where = []
    for folder in ("cud", "daemon", "drivers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, values in _string_collections(path):
                if {"click", "move", "scroll"} <= values:
                    where.append(f"{path.relative_to(ROOT)}:{line}")
    assert where and all(w.startswith(f"{home.relative_to(ROOT)}:") for w in where), where


def test_a_refused_approval_is_worded_in_one_place() -> None:
    # A denied or timed-out approval of any kind (action, safety, stuck, budget) is said by Approvals.refusal.
    said = []
    for folder in ("cud", "daemon"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            if "was denied by" in text or "with no decision" in text:
                said.append(str(path.relative_to(ROOT)))
    assert said == ["daemon/tasks/approvals.py"]
