"""Whether a cluster's workers can run a sweep's tasks.

Dask runs a task that asks for resources (``threads=k``, ``memory``, ``gpus``, ``tpus``, the
amounts of :data:`~sweep.capacity.resources.AMOUNTS`) only
on a worker that offers at least as much of each; while no worker does, the task stays queued
and nothing says why. :func:`unfit` names the resource no worker offers enough of and what to
change. It is asked before a run starts (:func:`sweep.cluster.clusters.check_fits`, the
workers already up) and as workers join during it (:mod:`sweep.client.listeners.fit`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sweep.capacity.resources import AMOUNTS, CORES, MEMORY, shown


def fits(offer: Mapping[str, float], asked: Mapping[str, float]) -> bool:
    """Whether a worker offering ``offer`` can run a task asking ``asked`` (Dask's own rule)."""
    return all(offer.get(name, 0) >= amount for name, amount in asked.items())


def unfit(address: str, offers: Sequence[Mapping[str, float]], asked: Mapping[str, float]) -> str | None:
    """Why no worker of the scheduler at ``address``, each offering one of ``offers``, can
    run a task asking ``asked``; None when one can, or when there is no worker (batch jobs
    may still be queued)."""
    if not offers or any(fits(o, asked) for o in offers):
        return None
    for name, amount in asked.items():
        largest = max(o.get(name, 0) for o in offers)
        if largest < amount:
            return _short(address, name, amount, largest)
    wanted = ", ".join(f"{name}={shown(name, amount)}" for name, amount in asked.items())
    return (
        f"no worker of {address} offers all of {wanted} at once (each falls short of one); "
        "ask less or start workers that offer it all"
    )


def _short(address: str, name: str, amount: float, largest: float) -> str:
    if name == MEMORY or name in AMOUNTS:
        return (
            f"resources.{name}={shown(name, amount)} but the largest worker of {address} offers "
            f"{shown(name, largest)}; lower resources.{name} or start workers with more "
            f"(cluster.{name}, or dask worker --resources {name}=N)"
        )
    lower = "lower resources.threads or " if name == CORES else ""
    return (
        f"no worker of {address} offers {name}={amount:g} (largest: {largest:g}); "
        f"{lower}start workers with --resources {name}=N"
    )
