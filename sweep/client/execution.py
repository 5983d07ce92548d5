"""One run of a sweep, from its checks to its last write.

:class:`Sweep` (:mod:`sweep.client.runner`) is a sweep's definition; each :meth:`Sweep.run`
makes an :class:`Execution` that owns that run alone::

    checks.before_run ─► startup: store (+ cluster, side by side when new and local)
        ─► store.todo() ─► plan: tasks ─► Window ─► RunLoop (listeners) ─► store.run_ended
        ─► the dataset, and a summary

The client is the only writer of the store. Each point is one Dask task
(:func:`sweep.worker.points.run_point`) submitted with ``resources={"threads": k}``; its
:class:`~sweep.wire.protocol.PointRecord` comes back and is written in the order points
finish, so an interrupted sweep loses nothing and a rerun runs only the points not ``done``.
:class:`RunOptions` are the run's settings, fixed for the run.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from sweep import provenance
from sweep.capacity import resources
from sweep.client import checks, plan, search, startup
from sweep.client.listeners.allocation import AllocationListener
from sweep.client.listeners.base import Listener, Run, end_listeners
from sweep.client.listeners.checkpoints import RunCheckpoints
from sweep.client.listeners.driverstate import DriverStateListener
from sweep.client.listeners.fit import FitListener
from sweep.client.listeners.learned import LearnedListener
from sweep.client.listeners.pinning import PinningListener
from sweep.client.listeners.progress import ProgressListener
from sweep.client.listeners.study import StudyListener
from sweep.client.loop import RunLoop
from sweep.client.progress import SweepProgress, notebook_display, show_summary, summary_table
from sweep.client.window import Window
from sweep.cluster.clusters import SubmissionError, local_cores
from sweep.cluster.dashboard import CURVED_POINTS, SweepPage
from sweep.model.space import Trials
from sweep.store import Store, StoreFull, attributes
from sweep.store.pointmask import PointMask
from sweep.store.results import open_results
from sweep.store.writer import ResultWriter
from sweep.wire import events
from sweep.wire.childconfig import ChildConfig
from sweep.wire.task import PointTask

if TYPE_CHECKING:
    import xarray as xr
    from distributed import Client

    from sweep.client.runner import Sweep

SEARCH_QUEUE = 2  # a search's trials in flight beyond the cluster's job slots
# a sweep of more points comes back lazy: loading 200,000 points' dataset (its text variables as
# Python strings) took 100 MB of the client's memory and 1.7 s (benchmarks/README.md)
LOADED_POINTS = 100_000


@dataclass(frozen=True)
class RunOptions:
    """How one run goes; the keyword arguments of :meth:`sweep.Sweep.run`.

    ``force`` starts the store over; ``keep_done`` keeps done points made with other inputs
    and runs the rest with the new ones; ``only_failed`` runs only the points whose status is
    one of :data:`~sweep.wire.protocol.NOT_DONE`; ``progress`` shows a live display and a
    closing summary; ``on_start(client)`` is called once the cluster is up, ``on_store()``
    once the store is open and locked by this process."""

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
        self._own_cluster = False  # whether this run started its cluster (not given a client)
        self._config = ChildConfig()  # the children's, set by the checks
        self.placement = plan.placement(self.recipe)  # made once for the run, handed whole
        self._t0 = time.monotonic()
        # in a notebook the progress block is displayed now, in the cell that starts the run,
        # and only updated in place afterwards, from whichever thread runs the sweep
        self._notebook = notebook_display(sweep.loaded.name, len(sweep)) if options.progress else None

    def execute(self, client: Client | None) -> xr.Dataset:
        """Run every point not yet done, on ``client`` or on the recipe's cluster started for
        them, and return the result dataset (see :meth:`sweep.Sweep.run`)."""
        self._config = checks.before_run(self.loaded, client, self.options.force, self.placement)
        if client is None and startup.opens_beside_cluster(self.loaded, self.options.force):
            opening = startup.beside_cluster(
                self._open_store, self.loaded, self._stop_for, self._started, self._config, self.placement
            )
            with opening as (store, own):
                self._work(store, own)
        else:
            if client is not None:
                startup.set_up_pool(client, self.loaded, self._config, self.placement)
            with self._open_store() as store:
                self._work(store, client)
        ds = self.dataset()
        self.stats["wall_s"] = time.monotonic() - self._t0
        if self.options.progress:
            if not self.stats.get("todo"):
                total = len(self.loaded.space)
                print(
                    f"[sweep] {self.output}: nothing to run, {total} of {total} points already ended",
                    file=sys.stderr,
                )
            table = summary_table(
                ds, self.stats["wall_s"], str(self.output), ran=int(self.stats.get("todo", 0))
            )
            show_summary(table, self.progress, self._notebook)
        return ds

    def dataset(self) -> xr.Dataset:
        """The store's dataset as a run hands it back: loaded, or lazy (dask arrays read as they
        are used) for a sweep of more than LOADED_POINTS points."""
        return open_results(self.output, load=len(self.loaded.space) <= LOADED_POINTS)

    def _started(self, own: Client) -> None:
        """This run started the cluster of ``own``: note it and set up its pool."""
        self._own_cluster = True
        self._mark("cluster")
        startup.set_up_pool(own, self.loaded, self._config, self.placement, own=True)

    def _open_store(self) -> Store:
        o = self.options
        store = Store.open(self.output, self.loaded, force=o.force, keep_done=o.keep_done)
        try:
            store.run_started()  # at once: a Ctrl-C from here on is recorded as the run's end
        except BaseException:
            store.close()
            raise
        if o.on_store is not None:
            try:
                o.on_store()
            except BaseException:
                store.run_ended("failed")
                store.close()
                raise
        self.store_ready.set()
        self._mark("store")
        return store

    def _work(self, store: Store, client: Client | None) -> None:
        """Run the store's points left to do on ``client``, or on the recipe's cluster started
        for them (none if nothing is left); the run's end state is recorded in the store."""
        state = "failed"
        try:
            if store.created and self.loaded.search is not None:
                search.journal_path(self.output).unlink(missing_ok=True)  # a study of an earlier store
            todo = store.todo(self.options.only_failed)
            self.stats["todo"] = len(todo)
            if store.growth is not None:
                self.stats.update(kept=store.growth.kept, new=store.growth.new)
                if self.options.progress:
                    print(
                        f"[sweep] {self.output}: the space changed: {store.growth.summary()}", file=sys.stderr
                    )
            if todo and client is None:
                with startup.cluster(self.loaded, self._stop_for, self._config, self.placement) as own:
                    self._started(own)
                    self._run_on(own, store, todo)
            elif todo and client is not None:
                self._run_on(client, store, todo)
            if self._fatal is not None:
                raise SubmissionError(self._fatal)
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

    def _run_on(self, client: Client, store: Store, todo: PointMask) -> None:
        """Run the points of ``todo`` on ``client``: the page told, the listeners made, the
        window and the loop run; a listener's error raised once the loop has ended."""
        self._mark("cluster")
        self._announce(client, store, todo)
        token = uuid.uuid4().hex[:6]
        total = len(self.loaded.space)
        with SweepProgress(
            total, total - len(todo), enabled=self.options.progress, notebook=self._notebook
        ) as bar:
            self.progress = bar
            saved = RunCheckpoints(token)
            study = self._study()
            listeners: list[Listener] = [ProgressListener(bar), saved, DriverStateListener(self.output, bar)]
            listeners += [study] if study is not None else []
            listeners += [LearnedListener(), PinningListener(), FitListener(), AllocationListener()]
            make = plan.task_maker(self.loaded, token, self._config, where=self.placement)
            tasks = (
                study.tasks(sorted(todo), make) if study is not None else plan.tasks(self.loaded, todo, make)
            )
            window = self._window(client, saved.carried(store, tasks), len(todo), token, store, study)
            run = Run(client, store, window, token, events.topic(self.loaded.name), self.cancel)
            self._listen(run, listeners, ResultWriter(store, bar.points_written))
        if run.failure is not None:
            raise run.failure

    def _listen(self, run: Run, listeners: list[Listener], writer: ResultWriter) -> None:
        """The run loop of ``run``, its listeners told of each event meanwhile."""

        def on_event(message: tuple[float, dict]) -> None:
            event = events.from_msg(message[1])
            if event is not None:
                for listener in listeners:
                    listener.on_event(event)

        run.client.subscribe_topic(run.topic, on_event)
        for listener in listeners:
            listener.on_start(run)
        ending: BaseException | None = None
        try:
            RunLoop(run, writer, listeners, self._mark, self.recipe.child.log_bytes).loop()
        except BaseException as exc:
            ending = exc
            raise
        finally:
            run.client.unsubscribe_topic(run.topic)
            self.stats["store_s"] += writer.store_s
            self.stats["points_run"] += writer.points
            end_listeners(run, listeners, ending)

    def _announce(self, client: Client, store: Store, todo: PointMask) -> None:
        """The /sweep page registered and told of the sweep, ``on_start`` called, the
        provenance of the workers recorded in the store."""
        client.register_plugin(SweepPage(), name=SweepPage.name)
        if self.options.on_start is not None:
            self.options.on_start(client)
        workers = dict(client.run(provenance.host_versions).values())
        store.set_attrs(**{attributes.PROVENANCE: provenance.record(self.loaded, workers)})
        small = len(self.loaded.space) <= plan.ANNOUNCED_POINTS  # else the page is told of no point
        announced = plan.announcement(
            self.loaded,
            todo,
            store.statuses() if small else None,
            store.latest_reports(CURVED_POINTS) if small else None,
        )
        client.log_event(events.topic(self.loaded.name), events.to_msg(announced))

    def _window(
        self,
        client: Client,
        tasks: Iterator[PointTask],
        left: int,
        token: str,
        store: Store,
        study: StudyListener | None,
    ) -> Window:
        """The window the run's tasks go through: a search's asked as late as they can be, a
        ``threads: auto`` sweep's calibrated (or its earlier choice kept), memory asked
        (:mod:`sweep.worker.memory`) of a cluster this run started with offers, or of workers
        seen to offer it."""
        from sweep.client import autothreads

        own = self._own_cluster and self.recipe.cluster.cluster_kind.owns_cluster
        return Window(
            client,
            tasks,
            left,
            self.loaded.space.names,
            token,
            placement=self.placement,
            queue=SEARCH_QUEUE if study is not None else None,
            auto=plan.calibration(self.recipe, autothreads.stored_choice(store.attr(autothreads.ATTR))),
            auto_cores=self._largest_worker(client),
            learn_memory=True,
            offers_memory=own,
        )

    def _largest_worker(self, client: Client) -> int:
        """The cores of the largest worker this run expects before one has joined: the local
        cluster's or a batch job's (``cluster.threads``, ``cluster.cores``), else the workers'."""
        c = self.recipe.cluster
        if c.cluster_kind.is_local and self._own_cluster:
            return c.threads or local_cores()
        if c.threads or c.cores:
            return int(c.threads or c.cores or 0)
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        return max((resources.cores(w["resources"]) for w in workers), default=0)

    def _study(self) -> StudyListener | None:
        """The search's study (resumed from its journal) as a listener, for a search."""
        spec = self.loaded.search
        if spec is None:
            return None
        space = cast(Trials, self.loaded.space)
        return StudyListener(search.Study(spec, space.axes, self.output, self.loaded.name))
