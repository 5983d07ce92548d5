"""The quickstart, written out by ``sweep init`` for a user who installed a built wheel.

The files are the repository's own ``recipes/quickstart.yaml`` and ``recipes/jobs/fdfd.py``,
shipped in a built wheel as the data package ``sweep.recipes`` (pyproject.toml maps it onto
``recipes/``), so there is one copy of each; an editable install reads them from the checkout.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from sweep.errors import UsageError

FILES = ("quickstart.yaml", "jobs/fdfd.py")  # relative to recipes/, as the recipe refers to them


def _source() -> Traversable:
    """Where the files are: the wheel's ``sweep.recipes``, else the checkout's ``recipes/``."""
    try:
        return resources.files("sweep.recipes")
    except ModuleNotFoundError:
        import sweep

        return Path(sweep.__file__).resolve().parent.parent / "recipes"  # beside the package


def write_starter(folder: Path) -> list[Path]:
    """Write the quickstart recipe and its job into ``folder`` (made if needed); the paths
    written. UsageError, writing nothing, when any of them exists already."""
    there = [folder / name for name in FILES if (folder / name).exists()]
    if there:
        names = ", ".join(str(p) for p in there)
        verb = "exists" if len(there) == 1 else "exist"
        raise UsageError(f"{names} already {verb}; `sweep init` overwrites nothing: pick a new folder")
    root = _source()
    written = []
    for name in FILES:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        text = root.joinpath(name).read_text()
        target.write_text(_for_the_user(text, folder / name) if name.endswith(".yaml") else text)
        written.append(target)
    return written


def _for_the_user(recipe: str, path: Path) -> str:
    """The repository's recipe as a user's copy: how to run it from where it was written, and
    where its output goes (``output`` is relative to the folder ``sweep submit`` runs in)."""
    lines = recipe.splitlines()
    lines = [
        f"# Run it with `sweep submit {path}`." if line.startswith("# Run it with") else line
        for line in lines
    ]
    lines = [
        f"{line}   # relative to the folder you run `sweep submit` in"
        if line.startswith("output:") and "#" not in line
        else line
        for line in lines
    ]
    return "\n".join(lines) + "\n"
