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
        "import sys, sweep.worker.pool, sweep.wire.task; "
        "print(sorted(m for m in ('pydantic', 'sweep.model.recipe', 'sweep.client.search', "
        "'sweep.client.plan', 'optuna', 'xarray', 'zarr') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# each folder and the folders it may import (besides itself and the foundation: sweep/*.py)
LAYERS = {
    "cli": {"client", "cluster", "store", "worker", "model", "capacity", "wire", "child"},
    "client": {"cluster", "store", "worker", "model", "capacity", "wire"},
    "cluster": {"worker", "model", "capacity", "wire"},
    "store": {"model", "wire"},
    "worker": {"capacity", "wire"},
    "model": {"capacity", "wire"},
    "capacity": {"wire"},
    "wire": set(),
    "child": {"wire"},
    "": set(),  # the foundation
}


def _folder(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else ""


def test_each_folder_imports_only_the_folders_below_it():
    found = modules()
    slips = []
    for name, path in found.items():
        if name == "sweep":
            continue  # the package's lazy table names every public module on purpose
        mine = _folder(name)
        for other in imports(path, set(found)):
            theirs = _folder(other)
            if other != "sweep" and theirs != mine and theirs and theirs not in LAYERS[mine]:
                slips.append(f"{name} imports {other}")
    assert not slips, slips


# what the client and cluster folders may import of the worker's: the Dask tasks and commands a
# client sends, the pool a local worker starts with, the batch job's end, and the node's own
# answers (accelerator drivers, memory, MPI launcher, JAX support, checkpoints' Dask keys, pinning)
WORKER_FACE = {
    "points", "commands", "pool", "batchjob", "endsignal", "kinds", "memory", "mpi", "gpus", "tpus",
    "checkpoints", "pinning",
}  # fmt: skip


def test_the_client_and_cluster_use_only_the_workers_face():
    found = modules()
    slips = []
    for name, path in found.items():
        if _folder(name) in ("client", "cluster"):
            for other in imports(path, set(found)):
                if other.startswith("sweep.worker.") and other.split(".")[2] not in WORKER_FACE:
                    slips.append(f"{name} imports {other}")
    assert not slips, slips


def test_the_architecture_page_names_every_folder_of_the_layer_table():
    assert {f"sweep/{f}/" for f in LAYERS if f} <= set(
        re.findall(r"`(sweep/[a-z]+/)`", (ROOT / "docs" / "architecture.md").read_text())
    )


THIRD_PARTY = {
    "numpy", "jax", "jaxlib", "psutil", "dask", "distributed", "pydantic", "xarray", "zarr", "yaml",
    "optuna", "rich", "pandas", "scipy", "cloudpickle", "tornado", "msgpack",
}  # fmt: skip


def _import_every_module(packages: list[str], blocked: str) -> subprocess.CompletedProcess:
    """Import every module of ``packages`` in a fresh interpreter where an import of a module
    ``name`` for which the expression ``blocked`` is true fails."""
    code = (
        "import sys, importlib, pkgutil\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if {blocked}:\n"
        "            raise ImportError(f'blocked: {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for pkg in {packages!r}:\n"
        "    package = importlib.import_module(pkg)\n"
        "    for m in pkgutil.iter_modules(package.__path__, pkg + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "print('ok')\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_every_module_of_wire_and_child_imports_with_third_party_libraries_blocked():
    out = _import_every_module(["sweep.wire", "sweep.child"], f"name.split('.')[0] in {THIRD_PARTY!r}")
    assert out.stdout.strip() == "ok", out.stderr


DASK_ITSELF = {"dask", "yaml", "cloudpickle"}  # what `import dask.utils` brings in


def test_every_module_of_capacity_imports_with_only_dask_of_the_third_party_libraries():
    blocked = THIRD_PARTY - DASK_ITSELF
    out = _import_every_module(["sweep.capacity"], f"name.split('.')[0] in {blocked!r}")
    assert out.stdout.strip() == "ok", out.stderr


def test_every_module_of_the_worker_imports_without_the_model_search_or_store_libraries():
    blocked = (
        "name.split('.')[0] in {'pydantic', 'xarray', 'zarr', 'optuna'}"
        " or name.startswith(('sweep.model', 'sweep.client'))"
    )
    out = _import_every_module(["sweep.worker"], blocked)
    assert out.stdout.strip() == "ok", out.stderr


def test_the_tests_mirror_the_package_folders():
    folders = {p.name for p in (ROOT / "tests").iterdir() if (p / "__init__.py").exists()}
    package = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders <= package, folders - package
    assert package - folders <= {"recipes"}, package - folders


def test_every_cli_run_of_the_tests_starts_from_the_one_helper():
    inline = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("*.py")
        if p.name != "helpers.py" and re.search(r"-m\W+sweep\.cli\b", p.read_text())
    ]
    assert not inline, f"use tests.helpers.cli / sweep_command in {inline}"


def test_the_wheel_lists_every_package_of_the_tree():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


def test_a_store_attribute_is_spelled_only_in_its_home():
    """Each attribute of a store's group is named once, in sweep/store/attributes.py; every
    other module uses the constant."""
    from sweep.store import attributes

    names = {v for k, v in vars(attributes).items() if k.isupper()}
    spelled = re.compile(r"[\"'](" + "|".join(sorted(names)) + r")[\"']")
    slips = [
        f"{path.relative_to(ROOT)}: {m.group(1)}"
        for path in sorted((ROOT / "sweep").rglob("*.py"))
        if path != ROOT / "sweep" / "store" / "attributes.py"
        for m in spelled.finditer(path.read_text())
    ]
    assert len(names) >= 25 and not slips, slips
