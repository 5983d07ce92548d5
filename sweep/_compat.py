"""Every reach into another library's private or undocumented API, fenced in one place.

Each function names what it relies on; ``tests/test_compat.py`` pins each of them, so an
upgrade that changes the behaviour fails there, loudly, rather than somewhere in a sweep.
"""

from __future__ import annotations

import os
import threading
from typing import Any


def start_zarr_io_threads(n: int) -> None:
    """Cap zarr's I/O thread pool at ``n`` and start all ``n`` threads now.

    Relies on: zarr 3's ``zarr.core.sync._get_executor()`` returning the process-wide
    ``ThreadPoolExecutor`` it does I/O on, and that executor's ``_max_workers`` and
    ``_threads``. Starting the threads up front matters when uncapped jobs later use up
    the user's ``ulimit -u``: the writer could no longer start the threads it needs.
    """
    import zarr

    if zarr.config.get("threading.max_workers", None) is None:
        zarr.config.set({"threading.max_workers": n})
    from zarr.core.sync import _get_executor

    executor = _get_executor()
    size = executor._max_workers
    if len(executor._threads) >= size:
        return
    barrier = threading.Barrier(size + 1)
    for _ in range(size):  # each blocked task forces the pool to start one more thread
        executor.submit(barrier.wait, 10)
    try:
        barrier.wait(10)
    except threading.BrokenBarrierError:  # the pool was busy: it will grow on demand instead
        pass


def text_dtype() -> Any:
    """The NumPy dtype xarray takes as variable-length text: object, its metadata naming the
    element type ``str``.

    Relies on: ``xarray.coding.strings.check_vlen_dtype`` reading that metadata, and
    ``xarray.backends.common.ensure_dtype_not_object`` leaving such a variable as it is.
    A plain object dtype makes xarray compute a lazy array to infer its type, on the default
    distributed client if there is one: a store's skeleton would wait for a worker.
    """
    import numpy as np

    return np.dtype("O", metadata={"element_type": str})


def jobqueue_parameters(cls: type) -> frozenset[str]:
    """Every keyword a dask-jobqueue cluster class ``cls`` accepts.

    Relies on: ``cls.job_cls`` (the Job subclass the cluster instantiates) and on the
    cluster passing unknown keywords through ``dask_jobqueue.core.JobQueueCluster.__init__``
    to ``job_cls.__init__`` and then ``dask_jobqueue.core.Job.__init__``; their signatures
    are the options. dask-jobqueue documents the options but exposes no list of them.
    """
    import inspect

    from dask_jobqueue.core import Job, JobQueueCluster

    names: set[str] = set()
    for fn in (cls.job_cls.__init__, Job.__init__, JobQueueCluster.__init__):  # type: ignore[attr-defined]
        names |= set(inspect.signature(fn).parameters)
    return frozenset(names)


def http_application(scheduler: Any) -> Any:
    """The tornado application of the scheduler's HTTP server (the dashboard's), or None.

    Relies on: ``distributed.Scheduler.http_application``, to which a plugin can add
    routes with ``add_handlers`` next to ``/status``.
    """
    return getattr(scheduler, "http_application", None)


def add_dashboard_page(scheduler: Any, page: str) -> bool:
    """Add ``page`` to the navigation bar of the scheduler's dashboard (every Bokeh page
    rendered from now on: ``/status``, ``/workers``, ...); False where the dashboard is not
    installed.

    Relies on: ``distributed.dashboard.scheduler.template_variables(scheduler)``, memoized
    per scheduler, whose ``"pages"`` list the dashboard's pages share by reference and render
    as the navigation bar (``distributed/http/templates/base.html``).
    """
    try:
        from distributed.dashboard.scheduler import template_variables
    except ImportError:  # no bokeh: no dashboard, no navigation bar
        return False
    pages = template_variables(scheduler)["pages"]
    if page not in pages:
        pages.append(page)
    return True


def worker_plugin(worker: Any, name: str) -> Any:
    """The plugin registered on ``worker`` under ``name``, or None.

    Relies on: ``distributed.Worker.plugins``, the mapping of name to installed plugin
    (public attribute, undocumented).
    """
    return worker.plugins.get(name)


def install_worker_plugin(worker: Any, plugin: Any, name: str) -> None:
    """Install ``plugin`` on ``worker`` from one of its task threads (runs its ``setup``).

    Relies on: ``distributed.Worker.plugin_add(plugin, name)``, the coroutine the scheduler
    calls when a client registers a plugin, run on the worker's event loop.
    """
    from distributed.utils import sync

    sync(worker.loop, worker.plugin_add, plugin=plugin, name=name)


def chunk_key(array: Any, block: tuple[int, ...]) -> str:
    """The path, relative to the array's folder, of the chunk file at ``block``.

    Relies on: zarr 3's ``Array.metadata.encode_chunk_key`` (the array's chunk key encoding,
    e.g. ``c/0/1``), the key a local store writes the chunk under.
    """
    return str(array.metadata.encode_chunk_key(block))


def set_batch_job_class(cluster: Any, cls: type) -> None:
    """Make a dask-jobqueue cluster start its batch jobs with ``cls`` (a subclass of its
    ``job_cls``): the class is the ``cls`` of SpecCluster's worker template ``new_spec``."""
    cluster.new_spec["cls"] = cls


async def forget_batch_jobs(cluster: Any, names: list[Any]) -> None:
    """Drop jobs from a SpecCluster's started workers (``cluster.workers``) so that the next
    ``scale`` submits them again; run on the cluster's event loop."""
    for name in names:
        cluster.workers.pop(name, None)


def worker_resources(worker: Any) -> tuple[dict[str, float], dict[str, float]]:
    """The worker's (total, available) Dask resources, the live dicts its state machine uses.

    Relies on: distributed's ``Worker.state`` (a ``WorkerState``) and its ``total_resources``
    and ``available_resources``: a task starts only when every resource it asks is available,
    which takes the ask off ``available_resources`` until the task ends. Change them only on
    the worker's event loop (:func:`on_worker_loop`).
    """
    return worker.state.total_resources, worker.state.available_resources


def on_worker_loop(worker: Any, fn: Any) -> None:
    """Run ``fn()`` on ``worker``'s event loop and wait for it (from a task's thread).

    Relies on: ``Worker.loop`` (a tornado ``IOLoop``) and its ``add_callback``."""
    done = threading.Event()

    def call() -> None:
        try:
            fn()
        finally:
            done.set()

    worker.loop.add_callback(call)
    done.wait()


def stop_task_profiler(worker: Any) -> bool:
    """Stop ``worker``'s statistical profiler of its task threads for good; whether it ran.
    Call it on the worker's event loop.

    Relies on: ``Worker.periodic_callbacks``, where the worker keeps the tornado
    ``PeriodicCallback`` named ``profile`` (every ``distributed.worker.profile.interval`` it
    walks the stack of each thread running a task) and ``profile-cycle`` (which rolls the
    samples into the profile's history).
    """
    callbacks = getattr(worker, "periodic_callbacks", {})
    stopped = [callbacks.pop(name, None) for name in ("profile", "profile-cycle")]
    for callback in stopped:
        if callback is not None:
            callback.stop()
    return any(c is not None for c in stopped)


def nanny_worker_pid(nanny: Any) -> int | None:
    """The pid of the worker process a ``distributed.Nanny`` runs, or None while there is none.

    Relies on: ``Nanny.process`` (a ``WorkerProcess``) and its ``process`` (an ``AsyncProcess``
    with ``pid``)."""
    process = getattr(getattr(nanny, "process", None), "process", None)
    return None if process is None else process.pid


def set_warnings_filters(filters: list[Any]) -> None:
    """Make ``filters`` the warnings filters, as a warm child puts back a job's changes.

    Relies on: ``warnings._filters_mutated()`` (CPython's ``_warnings``), which ``filterwarnings``
    calls after each change so the per-module "already warned" caches are dropped; without it a
    warning silenced by the job stays silenced. Where it is missing, ``resetwarnings`` plus the
    filters in order gives the same effect.
    """
    import warnings

    mutated = getattr(warnings, "_filters_mutated", None) or getattr(
        warnings, "_filters_mutated_lock_held", None
    )
    live: list[Any] = warnings.filters  # type: ignore[assignment]  # a list in CPython
    if mutated is not None:
        live[:] = filters
        mutated()
        return
    warnings.resetwarnings()
    live[:] = filters


def environ_snapshot() -> dict[bytes, bytes]:
    """A copy of the process's environment as ``os.environ`` keeps it: encoded keys to encoded
    values (what a warm child compares before and after each job).

    Relies on: CPython's ``os.environ._data`` on POSIX, the dict of encoded entries every
    change through ``os.environ`` updates; copying it is a tenth of the cost of
    ``dict(os.environ)``, which decodes every entry. Elsewhere, the entries encoded here.
    """
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return dict(data)
    return {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}


def forget_package_listings() -> None:
    """Drop what ``importlib.metadata`` and its backport ``importlib_metadata`` (where loaded)
    keep of each folder's listing, so the next lookup (``version("numpy")``) lists them again.

    Relies on: ``FastPath.__new__`` in each, an ``functools.lru_cache`` holding one FastPath
    per folder, each keeping its listing for as long as the folder's mtime is unchanged, a
    failed listing (EMFILE at the open-files limit) as an empty one. Python 3.12's
    ``importlib.invalidate_caches`` clears the standard library's; 3.11's does not (its
    ``MetadataPathFinder.invalidate_caches`` lacks ``@classmethod``).
    """
    import sys

    for name in ("importlib.metadata", "importlib_metadata"):
        fastpath: Any = getattr(getattr(sys.modules.get(name), "FastPath", None), "__new__", None)
        if hasattr(fastpath, "cache_clear"):
            fastpath.cache_clear()
