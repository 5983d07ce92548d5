"""The shape of the package, as docs/architecture.md draws it."""

import ast
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "sweep"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The package modules ``path`` imports, at its top or inside functions (a cycle through a
    deferred import is still a cycle of the design), except under ``if TYPE_CHECKING``."""
    out: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            out.update(a.name for a in node.names if a.name in known)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module and node.level == 0:
                out.update({node.module, *(f"{node.module}.{a.name}" for a in node.names)} & known)

    Visitor().visit(ast.parse(path.read_text()))
    return out


def test_no_import_cycle_between_the_modules():
    found = modules()
    graph = {name: imports(path, set(found)) - {name} for name, path in found.items()}
    cycles, done = [], set()

    def visit(name: str, trail: list[str]) -> None:
        for nxt in sorted(graph[name]):
            if nxt in trail:
                cycles.append(trail[trail.index(nxt) :] + [nxt])
            elif nxt not in done:
                visit(nxt, [*trail, nxt])
        done.add(name)

    for name in sorted(graph):
        visit(name, [name])
    assert not cycles, cycles


def test_the_architecture_page_names_every_module_and_only_those():
    page = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`(sweep(?:/[a-z_]+)*(?:/[a-z_]+\.py|/))`", page))
    files = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    named.discard("sweep/__init__.py")  # the package's own entry, named with the package
    packages = {str(p.parent.relative_to(ROOT)) + "/" for p in PACKAGE.rglob("__init__.py")}
    assert files | packages == named, (sorted((files | packages) - named), sorted(named - (files | packages)))


def test_a_worker_unpickles_and_runs_points_without_the_recipe_model_or_the_search():
    code = (
        "import sys, sweep.pool, sweep.task; "
        "print(sorted(m for m in ('pydantic', 'sweep.recipe', 'sweep.search', 'sweep.plan', 'optuna', "
        "'xarray', 'zarr') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
