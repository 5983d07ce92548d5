"""The checks a run makes before it starts anything: the recipe against the cluster, the
user's thread limit, the shell's environment and a search's journal. Each refuses with a
SweepError naming the fix, or warns once."""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

from sweep.capacity import resources
from sweep.client import plan, search
from sweep.cluster.clusters import check_fits, local_cores
from sweep.errors import SweepWarning
from sweep.model import limits
from sweep.model.job import may_use_jax
from sweep.store.layout import is_store
from sweep.wire.childconfig import ChildConfig, multipliers

if TYPE_CHECKING:
    from distributed import Client

    from sweep.model.recipe import LoadedRecipe
    from sweep.wire.placement import Placement


def before_run(loaded: LoadedRecipe, client: Client | None, force: bool, where: Placement) -> ChildConfig:
    """Every check of a run on ``client`` (None: the recipe's cluster, not started yet) whose
    points sit at ``where`` (the run's placement); the children's config, made once here (it
    checks the compile cache; children of a job that can't use JAX never load it)."""
    recipe = loaded.recipe
    plan.preflight(loaded, given_client=client is not None, where=where)
    if client is not None:
        check_fits(client, where)
    thread_headroom(loaded, client, where)
    environment(loaded)
    config = plan.child_config(recipe, jax=may_use_jax(loaded.job), where=where)
    if loaded.search is not None and not force and is_store(loaded.output):
        search.check_journal(loaded.output)  # before the store grows or a cluster starts
    return config


def thread_headroom(loaded: LoadedRecipe, client: Client | None, where: Placement) -> None:
    """Refuse (HeadroomError) a local plan of points at ``where`` that can't fit under
    ``ulimit -u``; warn if tight."""
    recipe = loaded.recipe
    c = recipe.child
    if not c.preflight or (client is None and not recipe.cluster.cluster_kind.is_local):
        return
    if client is None:
        cores = recipe.cluster.threads or local_cores()
    else:
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        cores = max((resources.cores(w["resources"]) for w in workers), default=0)
    if not cores:
        return
    p = limits.plan(cores, recipe.resources.cores, c.cap, where.thread_budget)
    warning = limits.check_headroom(p)
    if warning:
        warnings.warn(warning, SweepWarning, stacklevel=4)


def environment(loaded: LoadedRecipe) -> None:
    """Warn once about settings of this shell that the children will not inherit."""
    mine = dict(loaded.recipe.child.env)
    dropped = [m for m in multipliers(os.environ) if m.split("=")[0] not in mine and "XLA_FLAGS" not in mine]
    if dropped:
        warnings.warn(
            f"not passing {dropped} from your environment to the jobs: each extra XLA CPU device "
            "brings its own threads and breaks the thread budget. Set it in child.env to mean it",
            SweepWarning,
            stacklevel=4,
        )
