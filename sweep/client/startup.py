"""The start of a run: its store opened (and locked) and its cluster started, side by side
when they can be, and the core pool set up on the cluster's workers.

The store is complete before any job starts: once uncapped jobs have used up the user's
``ulimit -u``, even zarr's I/O threads could not be started any more. A new store on the
local default is created in a thread of its own while the cluster starts in the caller's
(:func:`beside_cluster`); otherwise the store opens first, and a cluster is started only if
it has points left to run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.client import plan
from sweep.cluster.clusters import connect
from sweep.model import backends
from sweep.store import Store, ownership
from sweep.store.layout import holds_data
from sweep.store.lock import locked
from sweep.wire.childconfig import ChildConfig
from sweep.worker import endsignal
from sweep.worker.commands import Prewarm, on_pool
from sweep.worker.pool import CorePool

if TYPE_CHECKING:
    from distributed import Client

    from sweep.model.recipe import LoadedRecipe
    from sweep.wire.placement import Placement


def opens_beside_cluster(loaded: LoadedRecipe, force: bool) -> bool:
    """Whether the store is new (or ``force``), the cluster local and the store not held by
    another process: only then is a cluster started before the store is known to have work
    (a new store always has), and a refused store costs a local cluster's start. An output
    folder that holds data (:func:`~sweep.store.layout.holds_data`) but no store, such as half
    a store, is not new: it is opened, and refused, before any cluster starts."""
    out = Path(loaded.output)
    new = (force and ownership.marked(out)) or not holds_data(out)
    return loaded.recipe.cluster.cluster_kind.is_local and new and not (out.exists() and locked(out))


@contextmanager
def cluster(
    loaded: LoadedRecipe, on_fatal: Callable[[str], None], config: ChildConfig, where: Placement
) -> Iterator[Client]:
    """The recipe's cluster started for this run, its batch jobs named for the sweep and
    logging into its store; ``on_fatal(reason)`` when it can't go on. A local cluster's worker
    starts with the run's core pool (:func:`core_pool`): its children warm while the worker
    joins, and :func:`set_up_pool` finds it there (``started_with_pool``)."""
    settings = backends.run_defaults(loaded.recipe.cluster, loaded.name, loaded.output)
    plugins = (core_pool(loaded, config, where),) if started_with_pool(loaded) else ()
    with connect(settings, where, on_fatal=on_fatal, plugins=plugins) as client:
        yield client


def started_with_pool(loaded: LoadedRecipe) -> bool:
    """Whether :func:`cluster` starts the cluster's workers with the run's core pool."""
    return loaded.recipe.cluster.cluster_kind.is_local


def core_pool(loaded: LoadedRecipe, config: ChildConfig, where: Placement) -> CorePool:
    """The run's core pool, as each worker sets it up: logging at the client's level, and
    warming this recipe's children (``child.prewarm``) placed at ``where``."""
    r = loaded.recipe
    level = logging.getLogger("sweep").getEffectiveLevel()
    # the pool warms what it can: not an MPI world, nor a child of GPUs or TPUs (CorePool.prewarm)
    warm = Prewarm(where, config, plan.recycling(r)) if r.child.prewarm else None
    return CorePool(log_level=level, warm=warm)


@contextmanager
def beside_cluster(
    open_store: Callable[[], Store],
    loaded: LoadedRecipe,
    on_fatal: Callable[[str], None],
    on_cluster: Callable[[Client], None],
    config: ChildConfig,
    where: Placement,
) -> Iterator[tuple[Store, Client]]:
    """Create the store (importing xarray and dask.array, writing its skeleton) in a thread
    while this one starts the local cluster: the two overlap, the store is ready before the
    first point is submitted. ``on_cluster(client)`` is called as soon as the cluster is up,
    before the store is waited for. If the store is refused, the cluster is closed and the
    store's error raised; if the cluster fails to start, the store is closed."""
    with ThreadPoolExecutor(1, thread_name_prefix="sweep-store") as pool:
        opening = pool.submit(open_store)
        try:
            with cluster(loaded, on_fatal, config, where) as client:
                on_cluster(client)
                with opening.result() as store:
                    yield store, client
        finally:
            wait([opening])
            if opening.exception() is None:
                opening.result().close()  # released already unless the cluster failed


def set_up_pool(
    client: Client, loaded: LoadedRecipe, config: ChildConfig, where: Placement, own: bool = False
) -> None:
    """Register the core pool on ``client``'s workers and have them start warming this
    recipe's children (``child.prewarm``): called once per run, as soon as a client is there,
    so the children start while the store opens and the sweep is set up. On a cluster this
    run started (``own``) whose workers started with the pool (:func:`cluster`), nothing is
    left to do: registering a pool again would close the children it is warming."""
    if own and started_with_pool(loaded):
        return
    pool = core_pool(loaded, config, where)
    client.register_plugin(pool, name=CorePool.name)
    if endsignal.warns(loaded.recipe.cluster.kind):  # its nannies pass the job's end warning on
        client.register_plugin(endsignal.EndSignal(), name=endsignal.EndSignal.name)
    if pool.warm is not None:  # a pool registered before (its children are warm, or warm now)
        client.run(on_pool, pool.warm)
