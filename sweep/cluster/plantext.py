"""What a sweep on a cluster's settings will ask for, in words (``submit --dry-run``,
``validate``): per worker, how many points run at once and which resource limits it."""

from __future__ import annotations

from sweep.capacity import resources
from sweep.capacity.accelerators import asked
from sweep.capacity.memory import shown
from sweep.cluster import accelerators, amounts
from sweep.cluster.clusters import local_cores, worker_memory
from sweep.model.recipe import ClusterSettings
from sweep.wire.placement import Placement


def plan_text(settings: ClusterSettings, placement: Placement, points: int) -> str:
    """What a sweep on these settings will ask for, in words (``submit --dry-run``,
    ``validate``): per worker, how many points at ``placement`` (cores, memory ask, GPUs or
    TPUs, amounts) run at once, and which of them limits it."""
    threads, memory, wanted = placement.cores, placement.memory, asked(placement)
    asks = (
        _count(threads, "core")
        + (f" (with its {wanted[0].noun}'s host runtime's)" if wanted and wanted[0].host_cores else "")
        + (f" and {shown(memory)}" if memory else "")
        + (f" and {wanted[0].resource}={wanted[1]:g}" if wanted else "")
        + "".join(f" and {name}={resources.shown(name, value)}" for name, value in placement.amounts)
    )

    offered = amounts.offered(settings)  # once: the local disk's free space moves

    def at_once(cores: int, memory_offer: int | None) -> tuple[int, str]:
        packed = memory if memory_offer is not None else None  # memory packs only where offered
        offer = {resources.CORES: cores, resources.MEMORY: memory_offer or 0, **offered}
        ask = resources.ask(threads, packed, amounts=placement.amounts)
        at, by = resources.at_once(offer, ask), resources.limit(offer, ask)
        by = "cores" if by == resources.CORES else by
        if wanted is not None:
            kind, amount = wanted
            by_devices = kind.points_at_once(accelerators.offered(settings, kind) or 0, amount)
            if by_devices < at:
                return by_devices, f"{kind.noun}s"
        return at, by

    if settings.cluster_kind.is_address:
        return f"scheduler {settings.address}; {_count(points, 'point')} of {asks}"
    offer = worker_memory(settings)
    if settings.cluster_kind.is_local:
        n = settings.threads or local_cores()
        at, by = at_once(n, offer)
        return (
            f"local cluster: 1 worker, {_count(n, 'core')} and {shown(offer)} (resources "
            f"threads={n}, memory={shown(offer)}{_amounts_text(offered, placement)}); "
            f"{_count(at, 'point')} of {asks} at a time, limited by {by}; {_count(points, 'point')}"
        )
    jobs = (
        f"adaptive, {settings.adapt.minimum_jobs}..{settings.adapt.maximum_jobs} batch jobs"
        if settings.adapt
        else _count(settings.jobs, "batch job")
    )
    at, by = at_once(settings.cores or 0, offer)
    return (
        f"{settings.kind}: {jobs}, each 1 worker with {_count(settings.cores or 0, 'core')} and "
        f"{settings.memory} (resources threads={settings.cores}, memory={shown(offer)}"
        f"{_amounts_text(offered, placement)}); "
        f"{_count(at, 'point')} of {asks} per worker at a time, limited by {by}; {_count(points, 'point')}; "
        f"TLS {'on' if settings.security else 'OFF'}"
    )


def _amounts_text(offered: dict[str, float], placement: Placement) -> str:
    """``, disk=50.00 GiB``: what a worker offers (``offered``) of the amounts a point asks."""
    return "".join(f", {name}={resources.shown(name, offered.get(name, 0))}" for name, _ in placement.amounts)


def _count(n: int, noun: str) -> str:
    """``1 core``, ``2 cores``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
