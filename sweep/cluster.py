"""Clusters: start or reach the Dask workers a sweep runs on.

Every worker runs with ``nthreads = N`` and advertises ``resources={"threads": N}``, N being
the cores it may lease; a point asks for ``{"threads": k}``, so Dask never starts more
points on a worker than its cores hold, and the worker's :class:`~sweep.pool.CorePool`
gives each one k cores of its own.

* ``local`` (default): a ``distributed.LocalCluster`` on this machine, one worker process
  with all CPUs of this process's affinity (or ``cluster.threads`` of them), every server
  and the dashboard bound to 127.0.0.1.
* ``address``: a running scheduler (``cluster.address``); its workers must have been
  started with ``--resources threads=N``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client, LocalCluster

from sweep.recipe import ClusterSettings


class ClusterError(RuntimeError):
    """The cluster can't run this sweep; the message says why and what to change."""


def local_cores() -> int:
    """CPUs this process may run on (its affinity mask, which honours cgroup cpusets)."""
    return len(os.sched_getaffinity(0))


def preflight(settings: ClusterSettings, threads: int) -> None:
    """Checks that need no cluster: a local worker must hold a job of ``threads`` cores."""
    if settings.kind != "local":
        return
    n = settings.threads or local_cores()
    if n > local_cores():
        raise ClusterError(f"cluster.threads={n} but this process may use {local_cores()} CPUs; lower it")
    if threads > n:
        raise ClusterError(
            f"resources.threads={threads} but the local worker has {n} cores; "
            f"lower resources.threads to at most {n}"
        )


@contextmanager
def connect(settings: ClusterSettings, threads: int) -> Iterator[Client]:
    """A client on the cluster ``settings`` describe, checked to fit jobs of ``threads`` cores."""
    preflight(settings, threads)
    if settings.kind == "local":
        n = settings.threads or local_cores()
        with (
            LocalCluster(
                n_workers=1,
                threads_per_worker=n,
                processes=True,
                resources={"threads": n},
                host="127.0.0.1",
                dashboard_address=settings.dashboard,
                silence_logs=logging.ERROR,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
    else:
        with Client(settings.address, timeout="30s") as client:
            check_fits(client, threads)
            yield client


def check_fits(client: Client, threads: int) -> None:
    """Raise ClusterError when no current worker could run a job of ``threads`` cores."""
    offers = [w["resources"].get("threads", 0) for w in client.scheduler_info()["workers"].values()]
    if offers and max(offers) < threads:
        raise ClusterError(
            f"no worker of {client.scheduler.address} offers threads={threads} (largest: "
            f"{max(offers)}); lower resources.threads or start workers with --resources threads=N"
        )
