"""Clusters: start or reach the Dask workers a sweep runs on.

Every worker runs with ``nthreads = N`` and advertises ``resources={"threads": N}``, N being
the cores it may lease; a point asks for ``{"threads": k}``, so Dask never starts more
points on a worker than its cores hold, and the worker's :class:`~sweep.worker.pool.CorePool`
gives each one k cores of its own.

* ``local`` (default): a scheduler in this process and one worker process on this machine
  with all CPUs of this process's affinity (or ``cluster.threads`` of them), every server
  and the dashboard bound to 127.0.0.1.
* ``address``: a running scheduler (``cluster.address``); its workers must have been
  started with ``--resources threads=N``.
* ``slurm``, ``pbs``, ``sge``, ``lsf``, ``htcondor``: dask-jobqueue, one worker per batch
  job, TLS by default (see :func:`batch_cluster`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import dask.config
from distributed import Client, Scheduler, SpecCluster

from sweep import _compat, cadence
from sweep.capacity import resources
from sweep.capacity.accelerators import asked
from sweep.capacity.memory import shown, size
from sweep.cluster import accelerators, amounts
from sweep.cluster.arrivals import Arrivals
from sweep.cluster.fits import unfit
from sweep.cluster.localworker import QUIET, LocalWorker, short_logs
from sweep.cluster.submissions import SubmissionWatch
from sweep.errors import SweepError, SweepWarning
from sweep.model import backends
from sweep.model.recipe import ClusterSettings
from sweep.wire.placement import GPUS, TPUS, Placement
from sweep.worker import batchjob, endsignal
from sweep.worker.memory import local_offer

log = logging.getLogger(__name__)
short_logs()  # the scheduler of a local or batch cluster runs in this process


class ClusterError(SweepError, RuntimeError):
    """The cluster can't run this sweep; the message says why and what to change."""


class SubmissionError(ClusterError):
    """The batch system refused the sweep's batch jobs (exit 1: the store is kept)."""

    exit_code = 1


def local_cores() -> int:
    """CPUs this process may run on (its affinity mask, which honours cgroup cpusets)."""
    return len(os.sched_getaffinity(0))


def node_cores(settings: ClusterSettings) -> int | None:
    """The cores one worker of ``settings`` offers, where known before any starts: the local
    worker's (``cluster.threads``, else this process's CPUs) or a batch job's
    (``cluster.cores``); None for the workers of a running scheduler."""
    if settings.cluster_kind.is_local:
        return settings.threads or local_cores()
    return settings.cores if settings.cluster_kind.is_batch else None


def local_cluster(
    threads: int | None = None,
    dashboard: str = "127.0.0.1:8787",
    security: bool = True,
    memory: str | int | None = None,
    gpus: int | None = None,
    tpus: int | None = None,
    plugins: Sequence[Any] = (),
    offers: Mapping[str, float] | None = None,
) -> SpecCluster:
    """The cluster of ``kind: local``: the scheduler in this process and one worker process
    with ``threads`` cores (default: all of this process's affinity), ``nthreads`` and
    ``resources={"threads": N, "memory": M}`` to match (M: ``memory``, default the memory
    available less a margin, :func:`sweep.worker.memory.local_offer`), ``"gpus": G`` and ``"tpus": T``
    (``gpus``, ``tpus``, default the devices this node has; none: no such resource), the plain
    amounts ``offers`` says (default: each one's local default, :mod:`sweep.cluster.amounts`),
    every server and the dashboard on 127.0.0.1. The
    worker is its own ``python -m sweep.cluster.localworker`` (:mod:`sweep.cluster.localworker`), so a script
    without ``if __name__ == "__main__":`` is never imported again. Use it from a notebook to
    keep children warm across sweeps: ``client = Client(sweep.local_cluster())``, then
    ``Sweep.run(client=client)``.

    With ``security`` (the default) the scheduler and worker talk mutual TLS with temporary
    certificates made in memory here (``cluster.security``, which ``Client(cluster)`` takes):
    loopback is shared by every user of the machine, and a client without them is refused at
    the handshake. The worker gets its key through a pipe, never a file. ``security=False``
    warns: then any local user can run code as you through the scheduler's port.

    The worker process runs in its own session, so a terminal's Ctrl-C (sent to the whole
    foreground process group) reaches only this process, which closes the cluster itself;
    Dask's event-loop thread starts with SIGINT blocked, and a Ctrl-C during the start is
    delivered here right after it.

    ``plugins``: worker plugins the worker process starts with, set up before it joins the
    scheduler (a run's core pool, so that its children warm while the cluster starts)."""
    n = threads or local_cores()
    sec = _security(security)
    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "dashboard_address": dashboard,
        "security": sec,
    }
    if sec is not None:
        options["protocol"] = "tls"
    scheduler = {"cls": Scheduler, "options": options}
    offered = {**accelerators.local_offers({GPUS: gpus, TPUS: tpus}), **amounts.local_offers(offers or {})}
    worker = {
        "cls": LocalWorker,
        "options": {
            "nthreads": n,
            "security": sec,
            "memory": local_offer(memory),
            "offers": offered,
            "plugins": tuple(plugins),
        },  # fmt: skip
    }
    with _sigint_deferred(), dask.config.set(QUIET):  # read as the scheduler starts
        return SpecCluster(
            scheduler=scheduler,
            workers={0: worker},
            name="sweep-local",
            silence_logs=logging.ERROR,
            security=sec,
        )


def _security(on: bool) -> Any:
    """Temporary TLS credentials (in memory), or None with the warning that says what it opens."""
    from distributed.security import Security

    if on:
        return Security.temporary()
    warnings.warn(
        "cluster.security is false: the scheduler accepts unauthenticated connections, and "
        "anyone who can reach it (every user of this machine, for a local cluster) can run code as you",
        SweepWarning,
        stacklevel=3,
    )
    return None


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Block SIGINT in this (main) thread while threads and processes are started: they
    inherit the mask, and a SIGINT that arrives meanwhile is delivered when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def preflight(settings: ClusterSettings, placement: Placement) -> None:
    """Checks that need no cluster: a worker must be able to hold a point at ``placement``: its
    cores (``ranks`` MPI ranks of ``cores // ranks`` each), memory ask, accelerators and amounts."""
    threads, memory, ranks = placement.cores, placement.memory, placement.ranks
    wanted = asked(placement)
    if wanted is not None:
        accelerators.preflight(settings, *wanted)
    n = node_cores(settings) or 0
    if settings.cluster_kind.is_local:
        if n > local_cores():
            raise ClusterError(f"cluster.threads={n} but this process may use {local_cores()} CPUs; lower it")
        where = "the local worker"
    elif settings.cluster_kind.is_batch:
        where = f"a {settings.kind} job (cluster.cores)"
    else:
        return
    if threads > n and ranks > 1:
        raise ClusterError(
            f"resources.ranks={ranks} x resources.threads={threads // ranks} = {threads} cores per point "
            f"but {where} has {n}; lower resources.ranks or resources.threads"
        )
    if threads > n:
        raise ClusterError(
            f"resources.threads={threads} but {where} has {n} cores; lower resources.threads to at most {n}"
        )
    offer = worker_memory(settings)
    if memory is not None and offer is not None and memory > offer:
        raise ClusterError(
            f"resources.memory={shown(memory)} but {where} offers {shown(offer)} "
            f"({'cluster.memory' if settings.memory else 'the memory available, less a margin'}); "
            "lower resources.memory or give the workers more (cluster.memory)"
        )
    amounts.preflight(settings, placement, where)


def worker_memory(settings: ClusterSettings) -> int | None:
    """The memory one worker of ``settings`` offers (None for ``kind: address``: its own)."""
    if settings.cluster_kind.is_local:
        return local_offer(settings.memory)
    if settings.cluster_kind.is_batch and settings.memory:
        return size(settings.memory)
    return None


def batch_cluster(settings: ClusterSettings, dry_run: bool = False) -> Any:
    """The dask-jobqueue cluster ``settings`` describe, not yet scaled.

    One worker process per batch job (``processes=1``) with ``--nthreads cores``, the
    ``threads`` resource and its own dashboard on 127.0.0.1; TLS with temporary certificates
    (written, private, under ``shared_temp_directory``, default ``~/.cache/sweep/tls``) unless
    ``security: false``; the scheduler's dashboard on ``cluster.dashboard`` (127.0.0.1 by
    default: reach it through an SSH tunnel). ``dry_run`` binds the scheduler to 127.0.0.1
    whatever the interface, so printing a job script opens nothing to the network.
    """
    opts = settings.jobqueue_options
    security = _security(settings.security)
    if security is not None:
        tls_dir = Path(opts.pop("shared_temp_directory", Path.home() / ".cache" / "sweep" / "tls"))
        tls_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        opts["shared_temp_directory"] = str(tls_dir)
    offer = f"{resources.CORES}={settings.cores},{resources.MEMORY}={size(settings.memory or 0)}"
    offer += accelerators.batch_offer(settings, opts) + amounts.batch_offer(settings)
    worker_args = [
        *opts.pop("worker_extra_args", []),
        "--resources",
        offer,
        "--dashboard-address",
        "127.0.0.1:0",
    ]
    scheduler_options = {"dashboard_address": settings.dashboard, **opts.pop("scheduler_options", {})}
    config = f"backends.{settings.kind}"
    seconds = backends.walltime_seconds(
        settings.kind, opts.get("walltime", dask.config.get(f"{config}.walltime", None))
    )
    prologue = opts.get("job_script_prologue", dask.config.get(f"{config}.job-script-prologue", None))
    # the worker knows when its job started (allocation cost) and ends (sweep.worker.batchjob)
    ends = [batchjob.prologue_line(seconds)] if seconds else []
    starts = [batchjob.start_line()] if backends.BACKENDS[settings.kind].shell_prologue else []
    if starts or ends:
        opts["job_script_prologue"] = [*starts, *ends, *(prologue or [])]
    if seconds:
        python = opts.get("python", dask.config.get(f"{config}.python", None)) or sys.executable
        endsignal.job_script_options(settings.kind, opts, python, seconds)
    if dry_run:
        scheduler_options.update(host="127.0.0.1", dashboard_address="127.0.0.1:0")
    return backends.cluster_class(settings.kind)(
        cores=settings.cores,
        memory=settings.memory,
        processes=1,
        security=security,
        scheduler_options=scheduler_options,
        worker_extra_args=worker_args,
        silence_logs="error",
        **opts,
    )


def scale(cluster: Any, settings: ClusterSettings) -> None:
    if settings.adapt is not None:
        cluster.adapt(minimum_jobs=settings.adapt.minimum_jobs, maximum_jobs=settings.adapt.maximum_jobs)
    else:
        cluster.scale(jobs=settings.jobs)


def _resubmit_lost_jobs(
    cluster: Any,
    watch: SubmissionWatch,
    arrivals: Arrivals,
    stop: threading.Event,
    every: float | None = None,
) -> None:
    """Replace batch jobs that ended under us (walltime, preemption, scancel), whose
    submission failed (``watch`` gives up after too many failures) or whose worker could not
    reach the scheduler (``arrivals`` ends the sweep when none ever could).

    A lost worker leaves the cluster's live jobs (after ``distributed.deploy.lost-worker-timeout``)
    but stays in its spec; re-asking for the same number of workers submits a job for each
    one missing. Dask then reruns the lost points on the new workers. Looks every ``every``
    seconds (:func:`cadence.resubmit_s` when not given).
    """
    every = cadence.resubmit_s() if every is None else every
    while not stop.wait(every):
        if cluster.status.name == "running" and watch.fatal is None:
            fatal, unreached = arrivals.look(cluster)
            if fatal is not None:
                watch.give_up(fatal)
                continue
            if unreached:
                cluster.sync(_compat.forget_batch_jobs, cluster, unreached)
            watch.forget_failed(cluster)
            missing = len(cluster.worker_spec) - len(cluster.workers)
            if missing > 0:
                log.info("resubmitting %d lost batch job(s)", missing)
            cluster.scale(len(cluster.worker_spec))


ALL_INTERFACES = ("", "0.0.0.0", "::", "[::]", "*")


def dashboard_hint(client: Client, settings: ClusterSettings) -> str:
    """The dashboard's link on the address it listens on (``cluster.dashboard``'s host; Dask's
    own link names the scheduler's host) with the ``/sweep`` page beside it, and, for a batch
    cluster whose dashboard listens on loopback only, the SSH tunnel to reach it from another
    machine."""
    link = urlsplit(client.dashboard_link)
    host = settings.dashboard.rpartition(":")[0]
    if host not in ALL_INTERFACES and link.port is not None:
        link = link._replace(netloc=f"{host}:{link.port}")
    text = f"{urlunsplit(link)} (points: {urlunsplit(link._replace(path='/sweep'))})"
    if settings.cluster_kind.is_batch and link.hostname in ("127.0.0.1", "localhost", "::1"):
        port = link.port
        text += f"  (from your machine: ssh -N -L {port}:127.0.0.1:{port} {socket.getfqdn()})"
    return text


@contextmanager
def connect(
    settings: ClusterSettings,
    where: Placement,
    on_fatal: Callable[[str], None] | None = None,
    plugins: Sequence[Any] = (),
) -> Iterator[Client]:
    """A client on the cluster ``settings`` describe, checked to fit points placed at ``where``;
    a local cluster's worker starts with ``plugins`` (:func:`local_cluster`).

    For batch kinds, ``on_fatal`` is called (from another thread) with the batch system's
    message when submitting its jobs fails for good (:mod:`sweep.cluster.submissions`); the caller
    stops the sweep then (and raises :class:`SubmissionError`)."""
    preflight(settings, where)
    if settings.cluster_kind.is_local:
        with (
            local_cluster(
                settings.threads,
                settings.dashboard,
                settings.security,
                settings.memory,
                settings.gpus,
                settings.tpus,
                plugins,
                settings.amounts,
            ) as cluster,
            Client(cluster, security=cluster.security) as client,
        ):
            yield client
    elif settings.cluster_kind.is_batch:
        with batch_cluster(settings) as cluster, Client(cluster, security=cluster.security) as client:
            watch = SubmissionWatch(settings.kind, on_fatal or (lambda message: log.error("%s", message)))
            watch.install(cluster)
            scale(cluster, settings)
            stop = threading.Event()
            keeper = threading.Thread(
                target=_resubmit_lost_jobs,
                args=(cluster, watch, Arrivals(settings.jobqueue_options.get("interface")), stop),
                daemon=True,
            )
            keeper.start()
            try:
                yield client
            finally:
                stop.set()
                keeper.join()
    else:
        with Client(settings.address, timeout="30s") as client:
            check_fits(client, where)
            yield client


def check_fits(client: Client, where: Placement, memory: int | None = None) -> None:
    """Raise ClusterError when no current worker could run a point placed at ``where``: its
    cores, accelerator and amounts, and ``memory`` bytes (default: the placement's) once a
    worker offers memory (:func:`sweep.cluster.fits.unfit`)."""
    info = client.scheduler_info(n_workers=-1)
    offers = [w["resources"] for w in info["workers"].values()]
    memory = where.memory if memory is None else memory
    offered = any(resources.MEMORY in o for o in offers)
    ask = resources.ask(where.cores, memory if offered else None, where.accelerator, where.amounts)
    why = unfit(info["address"], offers, ask)
    if why is not None:
        raise ClusterError(why)
