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
        raise UsageError(f"{names} already exist(s); `sweep init` overwrites nothing: pick a new folder")
    root = _source()
    written = []
    for name in FILES:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(root.joinpath(name).read_text())
        written.append(target)
    return written
