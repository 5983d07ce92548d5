"""From a validated recipe to the tasks a sweep submits: one :class:`PointTask` per point.

A task is everything a worker needs to run one point (the job, its keyword arguments, the
cores it leases, its limits, how its child is started) and is small and picklable. Its Dask
key names the sweep and the point so the dashboard reads ``<sweep>-<param=value,...>-<index>``.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from pathlib import Path
from typing import Any

from sweep.capacity.accelerators import asked, host_cores
from sweep.capacity.budget import point_threads
from sweep.client import autothreads
from sweep.cluster.clusters import node_cores
from sweep.errors import SweepWarning
from sweep.model.recipe import LoadedRecipe, Recipe
from sweep.wire.childconfig import ChildConfig, default_compile_cache
from sweep.wire.events import LISTED_POINTS, SweepAnnounced
from sweep.wire.placement import Placement
from sweep.wire.recycling import Recycling
from sweep.wire.task import Limits, PointTask
from sweep.worker import gpus, tpus


def child_config(recipe: Recipe, jax: bool = True, *, where: Placement) -> ChildConfig:
    """How the recipe's children are started (``child.*`` keys); ``jax``: whether its job may
    use JAX (:func:`sweep.model.job.may_use_jax`); ``where``: the run's :func:`placement`.

    A compile cache this process can't write is dropped with a warning (the children run
    without it) rather than failing every point.
    """
    c = recipe.child
    cache = c.compile_cache
    cache_dir = default_compile_cache() if cache is True else (cache or None)
    problem = cache_dir and _unwritable(cache_dir)
    if problem:
        warnings.warn(
            f"the JAX compile cache {cache_dir} can't be written ({problem}); the children run "
            "without it. Set child.compile_cache to a writable path (or false)",
            SweepWarning,
            stacklevel=3,
        )
        cache_dir = None
    return ChildConfig(
        cap=c.cap,
        compile_cache=cache_dir,
        platforms=child_platforms(recipe, where),
        env=tuple(sorted(c.env.items())),
        mpirun=c.mpirun,
        jax=jax,
    )


def preflight(loaded: LoadedRecipe, given_client: bool = False, *, where: Placement) -> None:
    """The checks of a recipe that need no cluster (:func:`sweep.cluster.clusters.preflight` unless a
    client is given, and :func:`sweep.worker.mpi.preflight`); each raises a SweepError naming the fix.
    ``where``: the run's :func:`placement`."""
    from sweep.cluster import clusters
    from sweep.worker import mpi

    r = loaded.recipe
    if not given_client:
        clusters.preflight(r.cluster, where)
    local = r.cluster.cluster_kind.is_local or given_client
    mpi.preflight(r.resources.ranks, r.child.mpirun, local, loaded.job)
    if local:
        gpus.check_jax(child_platforms(r, where))
        tpus.check_jax(child_platforms(r, where))


def child_platforms(recipe: Recipe, where: Placement) -> str:
    """``JAX_PLATFORMS`` of the children: ``child.platforms`` when the recipe sets it, else
    the platform of the accelerator the points ask for (``cuda``, ``tpu``; ``where``: their
    placement), else ``cpu``."""
    c = recipe.child
    wanted = asked(where)
    if "platforms" not in c.model_fields_set and wanted is not None:
        return wanted[0].platform
    return c.platforms


def _unwritable(folder: str) -> str | None:
    """Why ``folder`` can't be made and written to, or None."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


MPI_TIMEOUT_FACTOR = 3.0  # an MPI point without resources.timeout: this times resources.expected


def point_timeout(recipe: Recipe) -> float | None:
    """A point's wall-time limit: ``resources.timeout``; for an MPI point without one,
    ``MPI_TIMEOUT_FACTOR`` times ``resources.expected``: a bound beside the stall watch, which
    judges each rank by its own CPU time (Open MPI's ranks busy-poll while they wait in a
    collective, so the world's CPU time grows while one rank hangs)."""
    r = recipe.resources
    if r.timeout is None and r.ranks > 1 and r.expected:
        return MPI_TIMEOUT_FACTOR * r.expected
    return r.timeout


def budget(recipe: Recipe, k: int | None = None) -> int:
    """Threads each point of ``recipe`` may hold (``k``: its cores, default
    ``resources.threads``): :func:`sweep.capacity.budget.point_threads`."""
    r = recipe.resources
    k = r.threads if k is None else k
    return point_threads(k, r.ranks, r.extra_threads, r.gpus, r.tpus, r.thread_budget or 0)


def placement(recipe: Recipe, k: int | None = None) -> Placement:
    """Where each point of ``recipe`` sits (``k``: its cores per rank, default
    ``resources.threads``): the one place its cores, budget, memory ask, GPUs, ranks and
    amounts are worked out (:class:`~sweep.wire.placement.Placement`). A point that asks for a TPU chip
    also leases the cores its host runtime keeps busy
    (:data:`~sweep.capacity.accelerators.TPU_HOST_CORES`), as many of them as a node has
    beside the point's own."""
    r = recipe.resources
    k = r.threads if k is None else k
    # a device's host runtime gets cores of its own beside the point's, as many as a node has
    node = node_cores(recipe.cluster)
    host = host_cores(r.gpus, r.tpus)
    host = host if node is None else max(0, min(host, node // r.ranks - k))
    amounts = tuple(sorted(r.amounts.items()))
    return Placement((k + host) * r.ranks, budget(recipe, k), r.memory, r.gpus, r.ranks, r.tpus, amounts)


def recycling(recipe: Recipe) -> Recycling:
    """When the warm children of ``recipe``'s points are replaced (``child.max_jobs``, ``max_rss``)."""
    return Recycling.of(recipe.child.max_jobs, recipe.child.max_rss)


def task_maker(
    loaded: LoadedRecipe, run: str = "", config: ChildConfig | None = None, *, where: Placement
) -> Callable[[tuple[int, ...], Mapping[str, Any]], PointTask]:
    """A function making the task of the point at an index with the given swept parameters
    (the recipe's fixed parameters, resources, limits and child settings added; ``config``:
    the recipe's :func:`child_config`, when the caller has it; ``where``: the run's
    :func:`placement`)."""
    recipe = loaded.recipe
    r, fixed = recipe.resources, recipe.params.fixed
    limits = Limits(
        timeout=point_timeout(recipe),
        memory=r.memory,
        gpu_memory=r.gpu_memory,
        max_threads=where.thread_budget if r.on_thread_overflow == "fail" else None,
        stall=r.stall,
        log_bytes=recipe.child.log_bytes,
        checkpoint_bytes=r.checkpoint_bytes,
    )
    config = config or child_config(recipe, where=where)
    recycled = recycling(recipe)

    def make(index: tuple[int, ...], params: Mapping[str, Any]) -> PointTask:
        return PointTask(
            sweep=loaded.name,
            index=index,
            job=loaded.job,
            kwargs={**fixed, **params},
            placement=where,
            limits=limits,
            retries=r.retries,
            retry_memory=r.retry_memory,
            expected=r.expected,
            config=config,
            recycling=recycled,
            run=run,
        )

    return make


def calibration(recipe: Recipe, chosen: int | None = None) -> autothreads.Calibration | None:
    """The calibration of a ``threads: auto`` recipe (:mod:`sweep.client.autothreads`), its tasks
    retuned with the budget and thread limit of each k; None for a fixed k. ``chosen``: the
    k an earlier run chose (no calibration then)."""
    r = recipe.resources
    if r.threads_auto is None:
        return None

    def retune(task: PointTask, k: int) -> PointTask:
        return autothreads.placed(task, placement(recipe, k), r.on_thread_overflow == "fail")

    return autothreads.Calibration(r.threads_auto, retune, chosen=chosen)


def tasks(
    loaded: LoadedRecipe,
    todo: Iterable[tuple[int, ...]],
    make: Callable[[tuple[int, ...], Mapping[str, Any]], PointTask],
) -> Iterator[PointTask]:
    """The tasks for the given point indices (a set or a :class:`~sweep.store.pointmask.PointMask`),
    in the space's order, made by ``make`` (a :func:`task_maker`) as they are taken."""
    wanted = todo if isinstance(todo, Set) else set(todo)
    return (make(p.index, p.params) for p in loaded.space.points() if p.index in wanted)


def task_key(task: PointTask, names: Iterable[str], token: str) -> str:
    """A Dask key readable on the dashboard: ``name-a=1,b=x-<index>-<token>`` (shortened)."""
    shown = ",".join(f"{n}={task.kwargs[n]}" for n in names)
    if len(shown) > 48:
        shown = shown[:45] + "..."
    return f"{task.sweep}-{shown}-{'.'.join(map(str, task.index))}-{token}"


ANNOUNCED_POINTS = LISTED_POINTS  # a larger sweep's page lists the points it hears of, not all


def announcement(
    loaded: LoadedRecipe,
    todo: Set[tuple[int, ...]],
    statuses: Any = None,
    reports: Mapping[tuple[int, ...], list[dict[str, Any]]] | None = None,
) -> SweepAnnounced:
    """What the ``/sweep`` page is told of a sweep: its space, which points are to run, the
    stored status of the others (``statuses``, an array over the space; else ``done``) and
    the stored report rows of earlier runs' points (``reports``, so that a resumed sweep's
    page draws their curves). Every point up to ANNOUNCED_POINTS; beyond, none: one event
    naming every point of a big sweep would be megabytes."""
    space = loaded.space
    reports = reports or {}
    points = [
        {
            "index": list(p.index),
            "params": p.params,
            "status": "queued" if p.index in todo else "done" if statuses is None else str(statuses[p.index]),
        }
        | ({"reports": reports[p.index]} if p.index in reports and p.index not in todo else {})
        for p in space.points()
        if len(space) <= ANNOUNCED_POINTS
    ]
    coords = {d: space.coords[d][1].tolist() for d in space.dims if d in space.coords}
    s = loaded.search
    search = (
        {}
        if s is None
        else {"objectives": list(s.objectives), "directions": list(s.directions), "metric": s.metric}
    )
    return SweepAnnounced(space.kind, list(space.dims), coords, len(space), loaded.job.label, points, search)
