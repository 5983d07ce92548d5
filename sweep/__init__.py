"""sweep: parameter sweeps of JAX jobs in thread-capped, core-pinned warm child processes.

This module stays import-light on purpose: capped children import the ``sweep`` package
before they pin themselves to their cores, so nothing here may import numpy, jax or any
other library that sizes thread pools at import. The public names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweep._lazy import lazy_attributes

if TYPE_CHECKING:  # what editors and type checkers see; at run time the names load lazily
    from sweep.child.checkpoints import checkpoint, restore
    from sweep.child.ranks import rank, ranks
    from sweep.child.reporting import report
    from sweep.client.runner import Sweep, SweepRun, run
    from sweep.cluster.clusters import local_cluster
    from sweep.errors import SweepError
    from sweep.model.recipe import Recipe, RecipeError
    from sweep.store.results import open_results, report_history, unpadded
    from sweep.wire.protocol import Pruned

__version__ = "0.1.0"

__getattr__ = lazy_attributes(
    __name__,
    {
        "Sweep": "sweep.client.runner",
        "SweepRun": "sweep.client.runner",
        "run": "sweep.client.runner",
        "SweepError": "sweep.errors",
        "open_results": "sweep.store.results",
        "report_history": "sweep.store.results",
        "unpadded": "sweep.store.results",
        "report": "sweep.child.reporting",
        "checkpoint": "sweep.child.checkpoints",
        "restore": "sweep.child.checkpoints",
        "rank": "sweep.child.ranks",
        "ranks": "sweep.child.ranks",
        "Pruned": "sweep.wire.protocol",
        "Recipe": "sweep.model.recipe",
        "RecipeError": "sweep.model.recipe",
        "local_cluster": "sweep.cluster.clusters",
    },
)

__all__ = [
    "Pruned",
    "Recipe",
    "RecipeError",
    "Sweep",
    "SweepError",
    "SweepRun",
    "__version__",
    "checkpoint",
    "local_cluster",
    "open_results",
    "rank",
    "ranks",
    "report",
    "report_history",
    "restore",
    "run",
    "unpadded",
]
