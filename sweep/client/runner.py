"""The Python API: :class:`Sweep`, a sweep's definition, and :class:`SweepRun`, one run of it
in the background (the CLI uses them too)::

    s = sweep.Sweep(job=optimize, params={"grid": {"beta": [2, 8], "seed": [0, 1]}})
    ds = s.run()                      # starts a local cluster, or run(client=...) on yours
    run = s.start(client=client)      # the same in the background: a SweepRun handle

A :class:`Sweep` holds the validated recipe and nothing of any run; each run is an
:class:`~sweep.client.execution.Execution` (:mod:`sweep.client.execution`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distributed import Client

from sweep import interrupts
from sweep.client import plan
from sweep.client.execution import Execution, RunOptions
from sweep.client.progress import SweepProgress
from sweep.errors import SweepError
from sweep.model.recipe import LoadedRecipe, Recipe, RecipeError, safe_name
from sweep.model.values import load_yaml
from sweep.store import attributes
from sweep.store.results import open_results

if TYPE_CHECKING:
    import xarray as xr


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
        name: str | None = None,
        child: dict[str, Any] | None = None,
        cluster: dict[str, Any] | None = None,
        output: str | os.PathLike | None = None,
    ) -> None:
        data: dict[str, Any] = {"name": name or _job_name(job), "params": params}
        for key, value in (("resources", resources), ("child", child), ("cluster", cluster)):
            if value is not None:
                data[key] = value
        if output is not None:
            data["output"] = str(output)
        if isinstance(job, str):
            data["job"] = job
            loaded = Recipe.from_dict(data)
        else:
            loaded = Recipe.from_dict(data, job_fn=job)
        loaded.name_from = "given" if name else "job"
        self._setup(loaded)

    def _setup(self, loaded: LoadedRecipe) -> None:
        self.loaded = loaded
        self._last: Execution | None = None  # the newest run, see execution()

    @classmethod
    def from_store(cls, output: str | os.PathLike, overrides: list[str] | None = None) -> Sweep:
        """The sweep that made the store at ``output``, from the recipe it recorded (after its
        ``--set`` overrides), writing to ``output``. A store made in Python with a callable
        job can't be rebuilt so (RecipeError saying so): rerun it from Python."""
        attrs = open_results(output, load=False).attrs
        if attributes.RECIPE_DIR not in attrs:
            raise RecipeError(
                f"{output}: this store does not record its recipe; submit the recipe file again"
            )
        data = load_yaml(attrs[attributes.RECIPE])
        data["output"] = str(output)
        try:
            loaded = Recipe.from_dict(
                data,
                overrides,
                base=Path(attrs[attributes.RECIPE_DIR]),
                source=f"{output} (its sweep_recipe)",
            )
        except RecipeError as exc:
            if ":" not in str(data.get("job", "")):  # a callable's recipe names only the function
                raise RecipeError(
                    f"{exc}\n{output} was made in Python with a callable job: rerun it from Python, "
                    "e.g. Sweep(job, params, output=...).run(only_failed=True)"
                ) from None
            raise
        self = cls.__new__(cls)
        self._setup(loaded)
        return self

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

    @property
    def thread_budget(self) -> int:
        """Threads each job may hold (:func:`sweep.client.plan.budget`)."""
        return plan.budget(self.recipe)

    # -- running ------------------------------------------------------------------------
    def start(self, client: Client | None = None, **kwargs: Any) -> SweepRun:
        """Run in the background (for notebooks); returns a :class:`SweepRun` handle at once.

        Takes the keyword arguments of :meth:`run`.
        """
        return SweepRun(self, client, kwargs)

    def run(
        self,
        client: Client | None = None,
        *,
        force: bool = False,
        keep_done: bool = False,
        only_failed: bool = False,
        progress: bool = True,
        on_start: Callable[[Client], None] | None = None,
        cancel: threading.Event | None = None,
        on_store: Callable[[], None] | None = None,
    ) -> xr.Dataset:
        """Run every point not yet done and return the result dataset (xarray), loaded in
        memory; a sweep of more than 100,000 points (``LOADED_POINTS``) returns it lazy, read
        from the store as it is used (``open_results(output, load=False)``; ``.load()`` reads
        it all).

        Without ``client`` the recipe's cluster is started (and stopped at the end).
        Setting ``cancel`` stops the sweep: queued and running points are cancelled,
        finished ones are kept. Afterwards ``self.stats`` holds ``wall_s``, ``points_run``
        and ``store_s`` (time spent writing results), and ``kept`` and ``new`` when the space
        grew (values, points or ``n`` added: the points already run are kept, see
        :mod:`sweep.store.growth`). An output made by a different space or
        from other inputs (fixed parameters, job source, child settings) is refused with the
        differences (:class:`~sweep.store.StoreMismatch`) unless ``force`` (start over) or, for
        other inputs, ``keep_done`` (keep the done points, run the rest with the new inputs).
        ``only_failed`` runs only the points whose status is one of
        :data:`~sweep.wire.protocol.NOT_DONE` (not pending ones).
        ``on_start`` is called with the client once the cluster is up (the CLI prints the
        dashboard link there); ``on_store`` as soon as the store is open and locked by this
        process (the CLI publishes its pid there, for ``sweep cancel``). ``self.timeline`` says
        when the store was ready, the cluster up, the first point submitted and the first
        result back (seconds since the call). Each call is one :class:`~sweep.client.execution.Execution`.
        """
        options = RunOptions(force, keep_done, only_failed, progress, on_start, on_store)
        try:
            with interrupts.guarded():  # a Ctrl-C in importlib's code would leave its lock held
                return self.execution(options, cancel).execute(client)
        except SweepError as exc:  # the user's error, told whole: not the package's frames
            raise exc.with_traceback(None) from None

    def execution(self, options: RunOptions, cancel: threading.Event | None = None) -> Execution:
        """A new run of this sweep (not started); ``stats``, ``timeline`` and ``progress``
        follow the newest one."""
        self._last = Execution(self, options, cancel)
        return self._last

    @property
    def stats(self) -> dict[str, float]:
        """The last run's ``wall_s``, ``points_run``, ``store_s`` (and ``kept``/``new``)."""
        return self._last.stats if self._last is not None else {}

    @property
    def timeline(self) -> dict[str, float]:
        """When the last run's store was ready, its cluster up, its first point submitted and
        its first result back (seconds since it started)."""
        return self._last.timeline if self._last is not None else {}

    @property
    def progress(self) -> SweepProgress | None:
        """The running (or last) run's counts."""
        return self._last.progress if self._last is not None else None


class SweepRun:
    """A sweep running in a background thread: watch it, read partial results, cancel it.

    Made by :meth:`Sweep.start`.
    """

    def __init__(self, sweep: Sweep, client: Client | None, kwargs: dict[str, Any]) -> None:
        self.sweep = sweep
        self._result: xr.Dataset | None = None
        self._error: BaseException | None = None
        options = dict(kwargs)
        cancel = options.pop("cancel", None)
        self._execution = sweep.execution(RunOptions(**options), cancel)
        self._thread = threading.Thread(target=self._main, args=(client,), daemon=True)
        self._thread.start()

    def _main(self, client: Client | None) -> None:
        try:
            self._result = self._execution.execute(client)
        except BaseException as exc:  # handed to wait()
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def progress(self) -> dict[str, Any]:
        """Counts by state (done, failed, running, pending, total) and each running point's
        latest :func:`sweep.report` values, keyed by point index."""
        bar = self._execution.progress
        if bar is None:
            return {
                "total": len(self.sweep),
                "done": 0,
                "pruned": 0,
                "failed": 0,
                "running": 0,
                "pending": len(self.sweep),
            }
        return bar.snapshot()

    def results(self, timeout: float = 60.0) -> xr.Dataset:
        """The dataset as stored so far (points not finished read ``pending``), loaded or lazy
        as :meth:`Sweep.run` returns it; waits for the sweep to have opened its store first."""
        self._execution.store_ready.wait(timeout)
        return self._execution.dataset()

    def cancel(self) -> xr.Dataset:
        """Stop submitting, cancel what is queued or running, keep what is done; returns the dataset."""
        self._execution.cancel.set()
        return self.wait()

    def wait(self, timeout: float | None = None) -> xr.Dataset:
        """Block until the sweep ends; its dataset, or the exception it raised."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the sweep is still running after {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None, "a sweep that ended without an error has its dataset"
        return self._result


def _job_name(job: Callable | str) -> str:
    """A sweep's default name: its job function's name (``module:function`` -> ``function``)."""
    name = job.rpartition(":")[2] if isinstance(job, str) else getattr(job, "__name__", "")
    return safe_name(name if name and name != "<lambda>" else "sweep")


def run(job: Callable | str, params: dict[str, Any], **kwargs: Any) -> xr.Dataset:
    """Shorthand for ``Sweep(job, params, **kwargs).run()``."""
    client = kwargs.pop("client", None)
    return Sweep(job, params, **kwargs).run(client=client)


__all__ = ["Sweep", "SweepRun", "open_results", "run"]
