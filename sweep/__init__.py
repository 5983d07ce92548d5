"""sweep: parameter sweeps of JAX jobs in thread-capped, core-pinned warm child processes.

This module stays import-light on purpose: capped children import the ``sweep`` package
before they pin themselves to their cores, so nothing here may import numpy, jax or any
other library that sizes thread pools at import. The public names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what editors and type checkers see; at run time the names load lazily
    from sweep.child.reporting import report
    from sweep.cluster import local_cluster
    from sweep.errors import SweepError
    from sweep.protocol import Pruned
    from sweep.recipe import Recipe, RecipeError
    from sweep.runner import Sweep, SweepRun, run
    from sweep.store.results import open_results, report_history, unpadded

__version__ = "0.1.0"

_LAZY = {
    "Sweep": ("sweep.runner", "Sweep"),
    "SweepRun": ("sweep.runner", "SweepRun"),
    "SweepError": ("sweep.errors", "SweepError"),
    "run": ("sweep.runner", "run"),
    "open_results": ("sweep.store.results", "open_results"),
    "report": ("sweep.child.reporting", "report"),
    "Pruned": ("sweep.protocol", "Pruned"),
    "report_history": ("sweep.store.results", "report_history"),
    "unpadded": ("sweep.store.results", "unpadded"),
    "Recipe": ("sweep.recipe", "Recipe"),
    "local_cluster": ("sweep.cluster", "local_cluster"),
    "RecipeError": ("sweep.recipe", "RecipeError"),
}

__all__ = [
    "Pruned",
    "Recipe",
    "RecipeError",
    "Sweep",
    "SweepError",
    "SweepRun",
    "__version__",
    "local_cluster",
    "open_results",
    "report",
    "report_history",
    "run",
    "unpadded",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")
