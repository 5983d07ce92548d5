"""sweep: parameter sweeps of JAX jobs in thread-capped, core-pinned warm child processes.

This module stays import-light on purpose: capped children import the ``sweep`` package
before they pin themselves to their cores, so nothing here may import numpy, jax or any
other library that sizes thread pools at import. The public names load on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Sweep": ("sweep.runner", "Sweep"),
    "run": ("sweep.runner", "run"),
    "open_results": ("sweep.store", "open_results"),
    "report": ("sweep.reporting", "report"),
    "report_history": ("sweep.store", "report_history"),
    "Recipe": ("sweep.recipe", "Recipe"),
    "local_cluster": ("sweep.cluster", "local_cluster"),
    "RecipeError": ("sweep.recipe", "RecipeError"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")
