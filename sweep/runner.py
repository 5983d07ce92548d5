"""Run a sweep: open the store, submit the points still to do, write results as they come.

:class:`Sweep` is the Python API (the CLI uses it too)::

    s = sweep.Sweep(job=optimize, params={"grid": {"beta": [2, 8], "seed": [0, 1]}})
    ds = s.run()                      # starts a LocalCluster, or run(client=...) on yours

The client is the only writer of the store. Each point is one Dask task
(:func:`sweep.pool.run_point`) submitted with ``resources={"threads": k}`` under a key
that names the sweep and the point; results are written in the order they finish, so an
interrupted sweep loses nothing and a rerun runs only the points not ``done``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from distributed import Client, as_completed

from sweep import limits
from sweep.capped import ChildConfig, default_compile_cache, thread_budget
from sweep.cluster import check_fits, connect, local_cores, preflight
from sweep.dashboard import SweepPage
from sweep.pool import CorePool, PointTask, run_point
from sweep.progress import SweepProgress, summary_table
from sweep.recipe import LoadedRecipe, Recipe
from sweep.store import Store, open_results

# Results are written in batches: when this many points are waiting, or this many seconds
# after the oldest waiting one finished, so the store keeps up with thousands of short points
# per minute. A killed client loses at most that much finished work, which a rerun redoes.
FLUSH_POINTS = 256
FLUSH_SECONDS = 1.0


class Sweep:
    """A validated sweep: a job, a space of parameters, resources, cluster and output.

    ``job`` is a callable (referenced by import path when a child can import it, else
    cloudpickled) or a ``"module:function"`` / ``"file.py:function"`` string. The other
    arguments take the same values as the recipe keys of the same names.
    """

    def __init__(
        self,
        job: Callable | str,
        params: dict[str, Any],
        resources: dict[str, Any] | None = None,
        *,
        name: str = "sweep",
        child: dict[str, Any] | None = None,
        cluster: dict[str, Any] | None = None,
        output: str | os.PathLike | None = None,
    ) -> None:
        data: dict[str, Any] = {"name": name, "params": params}
        for key, value in (("resources", resources), ("child", child), ("cluster", cluster)):
            if value is not None:
                data[key] = value
        if output is not None:
            data["output"] = str(output)
        if isinstance(job, str):
            data["job"] = job
            self._setup(Recipe.from_dict(data))
        else:
            self._setup(Recipe.from_dict(data, job_fn=job))

    def _setup(self, loaded: LoadedRecipe) -> None:
        self.loaded = loaded
        self.stats: dict[str, float] = {}
        self.progress: SweepProgress | None = None  # the running sweep's counts
        self._cancel = threading.Event()
        self._store_ready = threading.Event()  # set once run() has opened the store

    @classmethod
    def from_yaml(
        cls, path: str | os.PathLike, overrides: list[str] | None = None, output: str | None = None
    ) -> Sweep:
        """A Sweep from a recipe file, with ``--set``-style overrides and an output override."""
        overrides = list(overrides or [])
        if output is not None:
            overrides.append(f"output={output}")
        self = cls.__new__(cls)
        self._setup(Recipe.load(path, overrides))
        return self

    # -- introspection ------------------------------------------------------------------
    @property
    def recipe(self) -> Recipe:
        return self.loaded.recipe

    @property
    def output(self) -> Path:
        return self.loaded.output

    def __len__(self) -> int:
        return len(self.loaded.space)

    def points(self) -> Iterable[Any]:
        return self.loaded.space.points()

    def child_config(self) -> ChildConfig:
        c = self.recipe.child
        cache = c.compile_cache
        cache_dir = default_compile_cache() if cache is True else (cache or None)
        return ChildConfig(
            cap=c.cap, compile_cache=cache_dir, platforms=c.platforms, env=tuple(sorted(c.env.items()))
        )

    @property
    def thread_budget(self) -> int:
        """Threads each job may hold: ``resources.thread_budget``, else 10 + 5k."""
        r = self.recipe.resources
        return r.thread_budget or thread_budget(r.threads)

    def tasks(self, todo: Iterable[tuple[int, ...]]) -> list[PointTask]:
        """The tasks for the given point indices, in the space's order."""
        todo = set(todo)
        r, fixed = self.recipe.resources, self.recipe.params.fixed
        config = self.child_config()
        return [
            PointTask(
                sweep=self.loaded.name,
                index=p.index,
                job=self.loaded.job,
                kwargs={**fixed, **p.params},
                threads=r.threads,
                timeout=r.timeout,
                memory=r.memory,
                retries=r.retries,
                thread_budget=self.thread_budget,
                kill_over_budget=r.on_thread_overflow == "fail",
                config=config,
                max_jobs=self.recipe.child.max_jobs,
                max_rss=self.recipe.child.max_rss,
            )
            for p in self.points()
            if p.index in todo
        ]

    # -- running ------------------------------------------------------------------------
    def start(self, client: Client | None = None, **kwargs: Any) -> SweepRun:
        """Run in the background (for notebooks); returns a :class:`SweepRun` handle at once."""
        return SweepRun(self, client, kwargs)

    def run(
        self,
        client: Client | None = None,
        *,
        force: bool = False,
        progress: bool = True,
        on_start: Callable[[Client], None] | None = None,
        block: bool = True,
        cancel: threading.Event | None = None,
    ) -> Any:
        """Run every point not yet done and return the result dataset (xarray).

        ``block=False`` returns a :class:`SweepRun` handle at once instead (the sweep goes on
        in a background thread). Setting ``cancel`` stops the sweep: queued and running points
        are cancelled, finished ones are kept.

        Without ``client`` the recipe's cluster is started (and stopped at the end).
        Afterwards ``self.stats`` holds ``wall_s``, ``points_run`` and ``store_s`` (time
        spent writing results).
        ``force`` replaces an output made by a different space. ``on_start`` is called
        with the client once the cluster is up (the CLI prints the dashboard link there).
        """
        if not block:
            return self.start(client, force=force, progress=progress, on_start=on_start)
        t0 = time.monotonic()
        self.stats = {"points_run": 0, "store_s": 0.0}
        self._cancel = cancel or threading.Event()
        k = self.recipe.resources.threads
        if client is None:
            preflight(self.recipe.cluster, k)
        else:
            check_fits(client, k)
        self._check_thread_headroom(client)
        # The store is complete before any job starts: once uncapped jobs have used up the
        # user's `ulimit -u`, even zarr's I/O threads could not be started any more.
        with Store.open(self.output, self.loaded, force=force) as store:
            self._store_ready.set()
            todo = store.todo()
            store.run_started()
            state = "failed"
            try:
                if todo:
                    if client is None:
                        with connect(self.recipe.cluster, k) as own:
                            self._run_on(own, store, todo, progress, on_start)
                    else:
                        self._run_on(client, store, todo, progress, on_start)
                state = "cancelled" if self._cancel.is_set() else "finished"
            finally:
                store.run_ended(state)
        ds = open_results(self.output)
        self.stats["wall_s"] = time.monotonic() - t0
        if progress:
            SweepProgress(0).console.print(summary_table(ds, self.stats["wall_s"], str(self.output)))
        return ds

    def _check_thread_headroom(self, client: Client | None) -> None:
        """Refuse (HeadroomError) a local plan that can't fit under ``ulimit -u``; warn if tight."""
        c = self.recipe.child
        if not c.preflight or (client is None and self.recipe.cluster.kind != "local"):
            return
        if client is None:
            cores = self.recipe.cluster.threads or local_cores()
        else:
            workers = client.scheduler_info()["workers"].values()
            cores = int(max((w["resources"].get("threads", 0) for w in workers), default=0))
        if not cores:
            return
        p = limits.plan(cores, self.recipe.resources.threads, c.cap, self.thread_budget)
        warning = limits.check_headroom(p)
        if warning:
            print(f"sweep: warning: {warning}", file=sys.stderr)

    def _announce(self, client: Client, topic: str, todo: set) -> None:
        """Tell the scheduler's ``/sweep`` page which points this sweep has."""
        space = self.loaded.space
        points = [
            {"index": list(p.index), "params": p.params, "status": "queued" if p.index in todo else "done"}
            for p in space.points()
        ]
        coords = {d: space.coords[d][1].tolist() for d in space.dims if d in space.coords}
        client.log_event(
            topic,
            {
                "event": "sweep",
                "kind": space.kind,
                "dims": list(space.dims),
                "coords": coords,
                "total": len(space),
                "job": self.loaded.job.label,
                "points": points,
            },
        )

    def _run_on(self, client: Client, store: Store, todo: set, progress: bool, on_start: Any) -> None:
        client.register_plugin(CorePool(), name=CorePool.name)
        client.register_plugin(SweepPage(), name=SweepPage.name)
        if on_start is not None:
            on_start(client)
        tasks = self.tasks(todo)
        token = uuid.uuid4().hex[:6]
        total = len(self.loaded.space)
        topic = f"sweep-{self.loaded.name}"
        names = self.loaded.space.names
        self._announce(client, topic, todo)
        with SweepProgress(total, total - len(todo), enabled=progress) as bar:
            self.progress = bar
            client.subscribe_topic(topic, lambda event: bar.on_event(event[1]))
            futures = {
                client.submit(
                    run_point,
                    t,
                    key=task_key(self.loaded.name, _swept(t, names), t.index, token),
                    resources={"threads": t.threads},
                    pure=False,
                ): t
                for t in tasks
            }
            try:
                self._collect(client, futures, store, bar)
            finally:
                client.unsubscribe_topic(topic)

    def _collect(self, client: Client, futures: dict, store: Store, bar: SweepProgress) -> None:
        """Write results as futures finish (batched), until all are done or cancelled."""
        pending: list[dict[str, Any]] = []

        def flush() -> None:
            t_write = time.perf_counter()
            written = store.write(pending)
            self.stats["store_s"] += time.perf_counter() - t_write
            self.stats["points_run"] += len(written)
            for r in written:
                bar.job_finished(r["index"], r["status"])
            pending.clear()
            bar.refresh()

        done = as_completed(futures, with_results=True, raise_errors=False)
        oldest = 0.0
        try:
            while not done.is_empty() or pending:
                if self._cancel.is_set():
                    client.cancel(list(futures))
                    break
                batch = done.next_batch(block=False)
                if batch and not pending:
                    oldest = time.monotonic()
                pending.extend(_record(futures.pop(f), result) for f, result in batch)
                due = len(pending) >= FLUSH_POINTS or time.monotonic() - oldest >= FLUSH_SECONDS
                if pending and (due or done.is_empty()):
                    flush()
                elif not batch:
                    time.sleep(0.01)
        except BaseException:
            client.cancel(list(futures))
            raise
        finally:
            flush()


class SweepRun:
    """A sweep running in a background thread: watch it, read partial results, cancel it.

    Made by :meth:`Sweep.start` (or ``Sweep.run(block=False)``).
    """

    def __init__(self, sweep: Sweep, client: Client | None, kwargs: dict[str, Any]) -> None:
        self.sweep = sweep
        self._result: Any = None
        self._error: BaseException | None = None
        self._cancel = threading.Event()
        kwargs = {**kwargs, "cancel": self._cancel}
        self._thread = threading.Thread(target=self._main, args=(client, kwargs), daemon=True)
        self._thread.start()

    def _main(self, client: Client | None, kwargs: dict[str, Any]) -> None:
        try:
            self._result = self.sweep.run(client, **kwargs)
        except BaseException as exc:  # handed to wait()
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def progress(self) -> dict[str, Any]:
        """Counts by state (done, failed, running, pending, total) and each running point's
        latest :func:`sweep.report` values, keyed by point index."""
        bar = self.sweep.progress
        if bar is None:
            return {
                "total": len(self.sweep),
                "done": 0,
                "failed": 0,
                "running": 0,
                "pending": len(self.sweep),
            }
        return bar.snapshot()

    def results(self, timeout: float = 60.0) -> Any:
        """The dataset as stored so far (points not finished read ``pending``); waits for the
        sweep to have opened its store first."""
        self.sweep._store_ready.wait(timeout)
        return open_results(self.sweep.output)

    def cancel(self) -> Any:
        """Stop submitting, cancel what is queued or running, keep what is done; returns the dataset."""
        self._cancel.set()
        return self.wait()

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the sweep ends; its dataset, or the exception it raised."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the sweep is still running after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._result


def _swept(task: PointTask, names: Iterable[str]) -> dict[str, Any]:
    return {n: task.kwargs[n] for n in names}


def _record(task: PointTask, result: Any) -> dict[str, Any]:
    """The record of a finished future; a task that raised (e.g. KilledWorker) fails its point."""
    if isinstance(result, dict):
        return result
    return {"index": task.index, "status": "failed", "attempts": 1, "error": f"task failed: {result!r}"}


def task_key(name: str, params: dict[str, Any], index: tuple[int, ...], token: str) -> str:
    """A Dask key readable on the dashboard: ``name-a=1,b=x-<index>-<token>`` (shortened)."""
    shown = ",".join(f"{k}={v}" for k, v in params.items())
    if len(shown) > 48:
        shown = shown[:45] + "..."
    return f"{name}-{shown}-{'.'.join(map(str, index))}-{token}"


def run(job: Callable | str, params: dict[str, Any], **kwargs: Any) -> Any:
    """Shorthand for ``Sweep(job, params, **kwargs).run()``."""
    client = kwargs.pop("client", None)
    return Sweep(job, params, **kwargs).run(client=client)


__all__ = ["Sweep", "open_results", "run", "task_key"]
