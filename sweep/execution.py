"""One run of a sweep: its options, its state, and the loop that drives it.

:class:`Sweep` (:mod:`sweep.runner`) is a sweep's definition; each :meth:`Sweep.run` makes an
:class:`Execution` that owns that run alone: the checks before it starts, the store and the
cluster (started side by side for a new store on the local default), the search's study,
the window of tasks in flight and the poll loop that writes results as they come, and the
run's timeline and statistics. :class:`RunOptions` are the run's settings, fixed for the run.

The client is the only writer of the store. Each point is one Dask task
(:func:`sweep.pool.run_point`, planned by :mod:`sweep.plan`) submitted with
``resources={"threads": k}``; its :class:`~sweep.protocol.PointRecord` comes back and is
written by a :class:`~sweep.store.writer.ResultWriter` in the order points finish, so an
interrupted sweep loses nothing and a rerun runs only the points not ``done``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from distributed import Client, Future, as_completed

from sweep import autothreads, cadence, driver, events, jobqueue, limits, plan, provenance, search
from sweep.capped import multipliers
from sweep.checkpoints import RunCheckpoints
from sweep.cluster import SubmissionError, check_fits, connect, local_cores
from sweep.dashboard import CURVED_POINTS, SweepPage
from sweep.errors import SweepWarning
from sweep.job import may_use_jax
from sweep.pool import CorePool, on_pool
from sweep.progress import SweepProgress, notebook_display, show_summary, summary_table
from sweep.protocol import PointRecord, StoppedAttempt
from sweep.space import Trials
from sweep.store import Store, StoreFull
from sweep.store.layout import is_store
from sweep.store.lock import locked
from sweep.store.pointmask import PointMask
from sweep.store.results import open_results
from sweep.store.writer import ResultWriter
from sweep.window import Window

if TYPE_CHECKING:
    from sweep.runner import Sweep

# The client looks for results every POLL_MIN_S while they come, backing off to POLL_MAX_S
# when none does (a job's next task is queued on its worker already: the wait costs no core).
POLL_MIN_S, POLL_MAX_S = 0.005, 0.1
SEARCH_QUEUE = 2  # a search's trials in flight beyond the cluster's job slots
# a sweep of more points comes back lazy: loading 200,000 points' dataset (its text variables as
# Python strings) took 100 MB of the client's memory and 1.7 s (benchmarks/README.md)
LOADED_POINTS = 100_000


@dataclass(frozen=True)
class RunOptions:
    """How one run goes; the keyword arguments of :meth:`sweep.Sweep.run`.

    ``force`` starts the store over; ``keep_done`` keeps done points made with other inputs
    and runs the rest with the new ones; ``only_failed`` runs only the failed, timed-out,
    stalled and killed points; ``progress`` shows a live display and a closing summary;
    ``on_start(client)`` is called once the cluster is up, ``on_store()`` once the store is
    open and locked by this process."""

    force: bool = False
    keep_done: bool = False
    only_failed: bool = False
    progress: bool = True
    on_start: Callable[[Client], None] | None = None
    on_store: Callable[[], None] | None = None


class Execution:
    """One run of ``sweep`` with ``options``; setting ``cancel`` stops it (queued and running
    points cancelled, finished ones kept). ``store_ready`` is set once the store is open."""

    def __init__(self, sweep: Sweep, options: RunOptions, cancel: threading.Event | None = None) -> None:
        self.sweep = sweep
        self.loaded = sweep.loaded
        self.recipe = sweep.recipe
        self.output = sweep.output
        self.options = options
        self.cancel = cancel or threading.Event()
        self.store_ready = threading.Event()
        self.stats: dict[str, float] = {"points_run": 0, "store_s": 0.0}
        self.timeline: dict[str, float] = {}  # moments of the run, see _mark
        self.progress: SweepProgress | None = None  # the running sweep's counts
        self._fatal: str | None = None  # why the cluster can't go on (set from another thread)
        self._search: search.Study | None = None  # a search's study while it runs
        self._search_stopped: str | None = None  # why a search stopped early
        self._checkpoints = RunCheckpoints("")  # the running run's (set as it starts)
        self._own_cluster = False  # whether this run started its cluster (not given a client)
        self._t0 = time.monotonic()
        # in a notebook the progress block is displayed now, in the cell that starts the run,
        # and only updated in place afterwards, from whichever thread runs the sweep
        self._notebook = notebook_display(sweep.loaded.name, len(sweep)) if options.progress else None

    def _cluster_settings(self) -> Any:
        """The recipe's cluster, batch jobs named for this sweep and logging into its store."""
        return jobqueue.run_defaults(self.recipe.cluster, self.loaded.name, self.output)

    def execute(self, client: Client | None) -> Any:
        """Run every point not yet done, on ``client`` or on the recipe's cluster started for
        them, and return the result dataset (see :meth:`sweep.Sweep.run`)."""
        k = self.recipe.resources.cores
        plan.preflight(self.loaded, given_client=client is not None)
        if client is not None:
            check_fits(client, k, self.recipe.resources.memory)
        self._check_thread_headroom(client)
        self._check_environment()
        # checks the compile cache (warns once); children of a job that can't use JAX never load it
        self._child_config = plan.child_config(self.recipe, jax=may_use_jax(self.loaded.job))
        if self.loaded.search is not None and not self.options.force and is_store(self.output):
            search.check_journal(self.output)  # before the store grows or a cluster starts
        return self._run_with_store(client)

    def _run_with_store(self, client: Client | None) -> Any:
        """:meth:`execute` once the checks have passed: the store, then the cluster's work.

        The store is complete before any job starts: once uncapped jobs have used up the
        user's ``ulimit -u``, even zarr's I/O threads could not be started any more. A new
        store on the local default is created in a thread of its own while the cluster starts
        in this one (:meth:`_open_beside_cluster`); otherwise the store opens first, and a
        cluster is started only if it has points left to run."""
        if client is None and self._opens_beside_cluster():
            self._open_beside_cluster()
        else:
            if client is not None:
                self._set_up_pool(client)
            with self._open_store() as store:
                self._work(store, client)
        ds = self.dataset()
        self.stats["wall_s"] = time.monotonic() - self._t0
        if self.options.progress:
            table = summary_table(ds, self.stats["wall_s"], str(self.output))
            show_summary(table, self.progress, self._notebook)
        return ds

    def dataset(self) -> Any:
        """The store's dataset as a run hands it back: loaded, or lazy (dask arrays read as they
        are used) for a sweep of more than LOADED_POINTS points."""
        return open_results(self.output, load=len(self.loaded.space) <= LOADED_POINTS)

    def _opens_beside_cluster(self) -> bool:
        """Whether the store is new (or --force given), the cluster local and the store not held
        by another process: only then is a cluster started before the store is known to have
        work (a new store always has), and a refused store costs a local cluster's start."""
        out = Path(self.output)
        new = self.options.force or not is_store(out)
        return self.recipe.cluster.kind == "local" and new and not (out.exists() and locked(out))

    def _open_beside_cluster(self) -> None:
        """Create the store (importing xarray and dask.array, writing its skeleton) in a
        thread while this one starts the local cluster: the two overlap, the store is ready
        before the first point is submitted. If the store is refused, the cluster is closed
        and the store's error raised; if the cluster fails to start, the store is closed."""
        k = self.recipe.resources.cores
        with ThreadPoolExecutor(1, thread_name_prefix="sweep-store") as pool:
            opening = pool.submit(self._open_store)
            try:
                with connect(self._cluster_settings(), k, on_fatal=self._stop_for) as own:
                    self._own_cluster = True
                    self._mark("cluster")
                    self._set_up_pool(own)
                    with opening.result() as store:
                        self._work(store, own)
            finally:
                wait([opening])
                if opening.exception() is None:
                    opening.result().close()  # released already unless the cluster failed

    def _set_up_pool(self, client: Client) -> None:
        """Register the core pool on ``client``'s workers and have them start warming this
        recipe's children (``child.prewarm``): called once per run, as soon as a client is
        there, so the children start while the store opens and the sweep is set up."""
        level = logging.getLogger("sweep").getEffectiveLevel()
        warm = (self.recipe.resources.cores, self._child_config, self.recipe.child.max_jobs)
        prewarm = self.recipe.child.prewarm and not self.recipe.resources.gpus  # a GPU child: at its lease
        client.register_plugin(CorePool(log_level=level, warm=warm if prewarm else None), name=CorePool.name)
        if prewarm:  # a pool registered before (its children are warm, or warm now)
            client.run(on_pool, "prewarm", *warm)

    def _open_store(self) -> Store:
        o = self.options
        store = Store.open(self.output, self.loaded, force=o.force, keep_done=o.keep_done)
        if o.on_store is not None:
            try:
                o.on_store()
            except BaseException:
                store.close()
                raise
        self.store_ready.set()
        self._mark("store")
        return store

    def _work(self, store: Store, client: Client | None) -> None:
        """Run the store's points left to do on ``client``, or on the recipe's cluster started
        for them (none if nothing is left); the run's end state is recorded in the store."""
        k = self.recipe.resources.cores
        if store.created and self.loaded.search is not None:
            search.journal_path(self.output).unlink(missing_ok=True)  # a study of an earlier store
        todo = store.todo(self.options.only_failed)
        if store.growth is not None:
            self.stats.update(kept=store.growth.kept, new=store.growth.new)
            if self.options.progress:
                print(f"[sweep] {self.output}: the space changed: {store.growth.summary()}", file=sys.stderr)
        store.run_started()
        state = "failed"
        try:
            if todo and client is None:
                with connect(self._cluster_settings(), k, on_fatal=self._stop_for) as own:
                    self._own_cluster = True
                    self._set_up_pool(own)
                    self._run_on(own, store, todo)
            elif todo and client is not None:
                self._run_on(client, store, todo)
            if self._fatal is not None:
                raise SubmissionError(self._fatal)
            if self._search_stopped is not None:
                raise search.SearchStopped(self._search_stopped)
            state = "cancelled" if self.cancel.is_set() else "finished"
        except StoreFull as exc:
            saved = int((store.statuses() == "done").sum())
            raise StoreFull(f"{exc}; {saved} points saved; submit again after freeing space") from None
        except KeyboardInterrupt:
            state = "interrupted"
            raise
        finally:
            store.run_ended(state)

    def _mark(self, moment: str) -> None:
        """Note when ``moment`` first happened, in seconds since :meth:`run` started
        (``self.timeline``: store, cluster, first_submit, first_result)."""
        self.timeline.setdefault(moment, time.monotonic() - self._t0)

    def _stop_for(self, reason: str) -> None:
        """Stop the sweep because the cluster can't go on (called from the cluster's threads)."""
        self._fatal = reason
        self.cancel.set()

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
        p = limits.plan(cores, self.recipe.resources.cores, c.cap, self.sweep.thread_budget)
        warning = limits.check_headroom(p)
        if warning:
            warnings.warn(warning, SweepWarning, stacklevel=3)

    def _check_environment(self) -> None:
        """Warn once about settings of this shell that the children will not inherit."""
        mine = dict(self.recipe.child.env)
        dropped = [
            m for m in multipliers(os.environ) if m.split("=")[0] not in mine and "XLA_FLAGS" not in mine
        ]
        if dropped:
            warnings.warn(
                f"not passing {dropped} from your environment to the jobs: each extra XLA CPU device "
                "brings its own threads and breaks the thread budget. Set it in child.env to mean it",
                SweepWarning,
                stacklevel=3,
            )

    def _run_on(self, client: Client, store: Store, todo: PointMask) -> None:
        self._mark("cluster")
        config = self._child_config
        client.register_plugin(SweepPage(), name=SweepPage.name)
        if self.options.on_start is not None:
            self.options.on_start(client)
        workers = dict(client.run(provenance.host_versions).values())
        store.set_attrs(sweep_provenance=provenance.record(self.loaded, workers))
        topic = events.topic(self.loaded.name)
        small = len(self.loaded.space) <= plan.ANNOUNCED_POINTS  # else the page is told of no point
        announced = plan.announcement(
            self.loaded,
            todo,
            store.statuses() if small else None,
            store.latest_reports(CURVED_POINTS) if small else None,
        )
        client.log_event(topic, events.to_msg(announced))
        total = len(self.loaded.space)
        token = uuid.uuid4().hex[:6]
        self._checkpoints = saved = RunCheckpoints(token)
        study = self._study()
        with SweepProgress(
            total, total - len(todo), enabled=self.options.progress, notebook=self._notebook
        ) as bar:
            self.progress = bar

            def on_event(message: Any) -> None:
                event = events.from_msg(message[1])
                bar.on_event(event)
                saved.heard(event)
                if study is not None and isinstance(event, events.PointReported):
                    study.heard(event.index, event.step, event.values)

            client.subscribe_topic(topic, on_event)
            queue = None
            if study is None:
                tasks = saved.carried(store, plan.tasks(self.loaded, todo, run=token, config=config))
            else:
                for told in study.history():
                    client.log_event(topic, events.to_msg(told))

                def asked(slot: tuple[int, ...], params: dict[str, Any]) -> None:
                    store.set_params(slot, params)
                    client.log_event(topic, events.to_msg(events.TrialTold(slot, params, "running")))

                tasks = saved.carried(
                    store, study.tasks(todo, plan.task_maker(self.loaded, token, config), asked)
                )
                queue = SEARCH_QUEUE
            auto = plan.calibration(self.recipe, autothreads.stored_choice(store.attr(autothreads.ATTR)))
            window = Window(
                client,
                tasks,
                len(todo),
                self.loaded.space.names,
                token,
                threads=self.recipe.resources.cores,
                queue=queue,
                gpus=self.recipe.resources.gpus,
                auto=auto,
                auto_cores=self._largest_worker(client),
                **self._memory(),
            )
            driver.publish(self.output, run=token)
            try:
                self._collect(client, window, ResultWriter(store, bar.points_written))
            finally:
                client.unsubscribe_topic(topic)
                if auto is not None and auto.decided_here and store.intact():
                    store.set_attrs(**{autothreads.ATTR: json.dumps(auto.summary())})
                if window.learned_from and store.intact():
                    store.set_attrs(sweep_memory_ask=json.dumps(
                        {"bytes": window.memory, "learned_from": window.learned_from}
                    ))  # fmt: skip

    def _largest_worker(self, client: Client) -> int:
        """The cores of the largest worker this run expects before one has joined: the local
        cluster's or a batch job's (``cluster.threads``, ``cluster.cores``), else the workers'."""
        c = self.recipe.cluster
        if c.kind == "local" and self._own_cluster:
            return c.threads or local_cores()
        if c.threads or c.cores:
            return int(c.threads or c.cores or 0)
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        return int(max((w["resources"].get("threads", 0) for w in workers), default=0))

    def _memory(self) -> dict[str, Any]:
        """How the window asks memory (:mod:`sweep.memory`): ``resources.memory``, else learned;
        of a cluster this run started with memory offers (local and batch), or of workers seen
        to offer it."""
        own = self._own_cluster and self.recipe.cluster.kind != "address"
        return {"memory": self.recipe.resources.memory, "learn_memory": True, "offers_memory": own}

    def _study(self) -> search.Study | None:
        """The search's study (resumed from its journal), for a search; None otherwise."""
        spec = self.loaded.search
        if spec is None:
            return None
        space = cast(Trials, self.loaded.space)
        self._search = search.Study(spec, space.axes, self.output, self.loaded.name)
        return self._search

    def _told(self, client: Client, records: list[PointRecord]) -> list[PointRecord]:
        """Tell the study how its trials ended; a trial without its objective fails, and when no
        trial has given one yet the sweep stops (its objective is likely misnamed)."""
        study = self._search
        if study is None:
            return records
        out = []
        for r in records:
            try:
                told = study.tell(r.index, r.status, r.outputs, r.reports)
                if told is not None:
                    client.log_event(events.topic(self.loaded.name), events.to_msg(told))
            except search.ObjectiveNotFinite as exc:
                r = replace(r, status="failed", error=str(exc))
            except search.ObjectiveMissing as exc:
                r = replace(r, status="failed", error=str(exc))
                if not study.completed():
                    self._search_stopped = f"trial {r.index[0]} failed, so the search stopped: {exc}"
                    self.cancel.set()
            out.append(r)
        return out

    def _prune(self, client: Client, window: Window) -> None:
        """Tell the jobs of the trials the pruner stopped (their next report raises Pruned)."""
        if self._search is None:
            return
        for slot in self._search.decide():
            try:
                client.run(on_pool, "prune", window.token, slot)
            except Exception as exc:  # a worker gone meanwhile: the trial ends anyway
                logging.getLogger(__name__).info("pruning trial %s: %s", slot, exc)

    def _stop(self, client: Client, window: Window) -> list[StoppedAttempt]:
        """Cancel what is queued and kill what runs (Dask's cancel leaves running tasks be);
        what the killed attempts had printed."""
        client.cancel(list(window.in_flight))
        try:
            replies = client.run(on_pool, "stop", window.token, self.recipe.child.log_bytes)
        except Exception as exc:  # a worker gone meanwhile: its children went with it
            logging.getLogger(__name__).info("stopping the run's children: %s", exc)
            return []
        return [a for stopped in replies.values() if stopped for a in stopped]

    def _write_batch(
        self, client: Client, window: Window, writer: ResultWriter, batch: list[tuple[Future, Any]]
    ) -> None:
        """Hand the records of finished tasks to the writer. A method of its own so that no
        local name keeps a finished future alive: its record would stay in the worker's memory
        (and a retiring worker would wait for it, :meth:`sweep.pool.CorePool.retire`)."""
        for future, result in batch:
            self._mark("first_result")
            records = self._checkpoints.ended(client, window.finished(future, result))
            writer.add(self._told(client, records))

    def _collect(self, client: Client, window: Window, writer: ResultWriter) -> None:
        """Submit points through ``window`` and write results as they finish (batched), until
        all are done or the sweep is cancelled."""
        self._mark("first_submit")
        done = as_completed(window.fill(), with_results=True, raise_errors=False)
        published = filled = time.monotonic()
        every = cadence.refresh_s()
        idle_s = POLL_MIN_S
        try:
            while not done.is_empty():
                self._prune(client, window)
                if time.monotonic() - filled >= every:  # workers may have joined
                    done.update(window.fill())
                    filled = time.monotonic()
                if time.monotonic() - published >= every and not writer.store.intact():
                    self._stop(client, window)
                    writer.drop()  # nowhere to write them
                    writer.store.check_intact()
                if self.progress is not None and time.monotonic() - published >= every:
                    driver.publish(
                        self.output,
                        running=self.progress.running_points(),
                        batch_jobs=driver.batch_jobs(client),
                    )
                    published = time.monotonic()
                self._checkpoints.keep(client, writer.store)
                if self.cancel.is_set():
                    writer.store.keep_logs(self._stop(client, window))
                    self._checkpoints.keep(client, writer.store)  # those saved as it was cancelled
                    break
                batch = done.next_batch(block=False)
                self._write_batch(client, window, writer, batch)
                if batch:
                    done.update(window.fill())
                if writer.due() or done.is_empty():
                    writer.flush()
                elif not batch:
                    time.sleep(idle_s)
                # look again soon while results come, less often the longer none comes
                idle_s = POLL_MIN_S if batch else min(POLL_MAX_S, idle_s * 1.5)
        except BaseException:
            client.cancel(list(window.in_flight))
            raise
        finally:
            writer.flush()
            self.stats["store_s"] += writer.store_s
            self.stats["points_run"] += writer.points
