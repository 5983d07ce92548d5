"""Where a store's results came from, recorded with them (``sweep_provenance``).

Per run: the command line, this process's host, Python and package versions, the versions
the workers saw (per host, once), and for the recipe file and the job's file, the git
repository they live in, its commit and whether the tree had uncommitted changes. Together
with ``sweep_inputs`` (:mod:`sweep.model.inputs`) this is what ``sweep status --provenance``
prints.
"""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

DISTRIBUTION = "capped-sweep"  # this project's name on the package registry (imported as sweep)
PACKAGES = (DISTRIBUTION, "jax", "jaxlib", "dask", "distributed", "xarray", "zarr", "numpy")


def versions() -> dict[str, str]:
    """Python's and the packages' versions in this process's environment."""
    out = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def host_versions() -> tuple[str, dict[str, str]]:
    """(host, versions) of the calling process: run on every worker by the client."""
    return socket.gethostname(), versions()


def git_state(path: Path) -> dict[str, Any] | None:
    """The git repository holding ``path``: its root, commit and whether its tree is dirty."""
    folder = path if path.is_dir() else path.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    root = git("rev-parse", "--show-toplevel")
    if root is None:
        return None
    status = git("status", "--porcelain")
    return {
        "repository": root,
        "commit": git("rev-parse", "HEAD") or "(no commit yet)",
        "dirty": bool(status),
    }


def record(loaded: Any, workers: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The provenance of a run of ``loaded`` whose workers reported ``workers`` (host -> versions)."""
    files = {"recipe": Path(loaded.source) if Path(loaded.source).is_file() else None}
    if loaded.job.kind == "file":
        files["job"] = Path(loaded.job.target)
    return {
        "command": " ".join(sys.argv),
        "client": {"host": socket.gethostname(), **versions()},
        "workers": workers,
        "git": {name: git_state(p.resolve()) for name, p in files.items() if p is not None},
    }
