"""The house's shape, checked: its rooms, no import circles, the layering, readable modules.

Who may import whom is written down once, as import-linter contracts in pyproject.toml (`make
lint` runs them: lint-imports); here they run too, and each is shown to break on a forbidden
import. docs/architecture.md draws the picture and names the modules these tests keep honest.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
OURS = ("bot", "storage", "aireserve_sim", "devslack")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


# -- import circles ------------------------------------------------------------------------------


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names an import statement loads: `from x import y` loads `x.y` when that is a
    module, else `x` (the parent package is loaded by any import of its modules: not counted)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join(parts + ([base] if base else []))
    return [f"{base}.{alias.name}" for alias in node.names]


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """module → the modules of `packages` it imports when it runs: at the top or inside a
    function alike; what only `if TYPE_CHECKING:` imports is left out (it never runs)."""
    paths = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def edges(module: str, path: Path) -> set[str]:
        found: set[str] = set()
        stack: list[ast.AST] = [ast.parse(path.read_text())]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.If) and _type_checking(node.test):
                stack.extend(node.orelse)
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in _imported(module, path.name == "__init__.py", node):
                    while name and name not in paths:
                        name = name.rpartition(".")[0]
                    if name and name != module:
                        found.add(name)
            stack.extend(ast.iter_child_nodes(node))
        return found

    return {module: edges(module, path) for module, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    assert circles(import_graph(ROOT, OURS)) == []


def test_the_circle_finder_sees_what_runs(tmp_path):
    """A circle closed by a lazy (in-function) or relative import counts; one closed only under
    TYPE_CHECKING doesn't."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    files = {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def later():\n    from . import a\n",
        "c.py": "import pkg.d\n",
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import X\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    assert circles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b"]]


# -- the layering contracts ----------------------------------------------------------------------

# One forbidden import per contract: (the file it is added to, the import).
FORBIDDEN = {
    "layers": ("bot/services/quoting.py", "from bot.slack import ids"),
    "pure-domain": ("bot/domain/models.py", "import aiohttp"),
    "storage-below": ("storage/audit.py", "from bot.clock import SystemClock"),
    "reserve-below": ("bot/reserve/errors.py", "from bot.logs import begin"),
    "jobs-ask-services": ("bot/jobs/sweeps.py", "from storage.db import Database"),
    "slack-storage": ("bot/slack/commands.py", "from storage.db import Database"),
    "dev-tools-seam": ("bot/app/runtime.py", "from aireserve_sim.embedded import Embedded"),
    "simulator-speaks-the-contract": ("aireserve_sim/engine.py", "from bot.domain import models"),
    "stand-in-knows-slack": ("devslack/store.py", "from bot.services import container"),
}


def _lint_imports(where: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", *only], cwd=where,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_contracts_hold():
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"Contracts: \d+ kept, 0 broken", run.stdout)


def test_every_contract_has_a_forbidden_import_to_show():
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    assert {c["id"] for c in contracts} == set(FORBIDDEN)


@pytest.mark.parametrize("contract", sorted(FORBIDDEN))
def test_a_forbidden_import_breaks_its_contract(tmp_path, contract):
    """A copy of the tree, one import added where the contract forbids it: lint-imports fails
    (and the same copy without it passes: the import is what broke it)."""
    for package in OURS:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    assert _lint_imports(tmp_path, contract).returncode == 0
    path, line = FORBIDDEN[contract]
    target = tmp_path / path
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    run = _lint_imports(tmp_path, contract)
    assert run.returncode == 1 and "Contracts: 0 kept, 1 broken." in run.stdout, run.stdout


# -- the rooms -----------------------------------------------------------------------------------


def test_the_root_holds_only_what_every_layer_uses():
    """bot/'s root: the entry point and what every layer uses (time, the log context); each
    other module lives in its room (app, config, observability, slack, jobs, services,
    reserve, domain)."""
    assert sorted(p.name for p in (ROOT / "bot").glob("*.py")) == [
        "__init__.py", "__main__.py", "clock.py", "logs.py"]


def test_every_package_says_what_it_owns_and_may_import():
    silent = [str(p.relative_to(ROOT)) for base in OURS for p in ROOT.glob(f"{base}/**/__init__.py")
              if not re.search(r"^Owns: .+^May import: ", ast.get_docstring(
                  ast.parse(p.read_text())) or "", re.M | re.S)]
    assert silent == []


# Wire schemas: one flat list each of the provider's models, as its contract lists them.
WIRE_SCHEMAS = {"bot/reserve/schemas.py"}


def test_every_module_stays_readable():
    """ARCHITECTURE rule 1: look hard at anything over 400 lines (450 is the hard limit outside
    wire schemas)."""
    long = [f"{p.relative_to(ROOT)}: {n}" for base in OURS for p in ROOT.glob(f"{base}/**/*.py")
            if (n := len(p.read_text().splitlines())) > 420
            and str(p.relative_to(ROOT)) not in WIRE_SCHEMAS]
    assert long == []


def test_the_architecture_page_names_modules_that_exist():
    page = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"\b((?:bot|storage|aireserve_sim|devslack)/[\w/]*\w(?:\.py)?)\b",
                           page))
    assert named and sorted(n for n in named if not (ROOT / n).exists()) == []
    assert "docs/architecture.md" in (ROOT / "README.md").read_text()
