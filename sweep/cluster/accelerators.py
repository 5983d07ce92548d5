"""What a cluster's workers offer of each kind of accelerator, and whether a point that asks
for one can run there: the local worker offers the devices this node has (``cluster.gpus`` /
``cluster.tpus`` override), a batch job those it asks its batch system for."""

from __future__ import annotations

import math
from typing import Any

from sweep.capacity.accelerators import ACCELERATORS, Accelerator
from sweep.errors import SweepError
from sweep.model import backends
from sweep.worker.kinds import KINDS


class AcceleratorError(SweepError, ValueError):
    """A point asks for devices no worker of the cluster has; the message says how to fix it."""


def offered(settings: Any, kind: Accelerator) -> int | None:
    """The devices of ``kind`` one worker of ``settings`` offers: the cluster key, else on a
    local cluster those this node has; None where the workers say it themselves."""
    given = getattr(settings, kind.resource)
    return _local(kind, given) if settings.cluster_kind.is_local else given


def local_offers(given: dict[str, int | None]) -> dict[str, int]:
    """What the local worker offers of each kind: ``given`` (a kind's ``cluster`` key), else
    the devices this node has."""
    return {name: _local(kind, given.get(name)) for name, kind in ACCELERATORS.items()}


def _local(kind: Accelerator, given: int | None) -> int:
    """The devices of ``kind`` the local worker offers: ``given``, else those this node has
    (found by the worker's driver of the kind)."""
    return _found(kind) if given is None else given


def _found(kind: Accelerator) -> int:
    return len(KINDS[kind.resource].find())


def preflight(settings: Any, kind: Accelerator, amount: float) -> None:
    """A point asking ``amount`` devices of ``kind`` needs a worker that has that many."""
    need, key = math.ceil(amount), kind.resource
    if settings.cluster_kind.is_local:
        found = _found(kind)
        given = getattr(settings, key)
        if given is not None and given > found:
            raise AcceleratorError(
                f"cluster.{key}={given} but this machine has {found} {kind.noun}(s); "
                f"set cluster.{key} to at most {found}, or leave it out"
            )
        have = given if given is not None else found
        if need > have:
            raise AcceleratorError(
                f"resources.{key}={amount:g} but the local worker has {have} {kind.noun}(s) (cluster.{key} "
                "overrides); "
                f"run on a node with them or drop resources.{key}"
            )
    elif settings.cluster_kind.is_batch and need > (getattr(settings, key) or 0):
        raise AcceleratorError(
            f"resources.{key}={amount:g} but a {settings.kind} job asks for {getattr(settings, key) or 0} "
            f"{kind.noun}(s); "
            f"set cluster.{key} (per batch job) to at least {need}"
        )


def batch_offer(settings: Any, opts: dict[str, Any]) -> str:
    """The ``--resources`` entries of a batch job's worker for its accelerators (``,gpus=G``...);
    GPUs are also asked of the batch system in its own syntax (added to ``opts``)."""
    offer = ""
    for name in ACCELERATORS:
        n = getattr(settings, name)
        if n:  # the batch system gives the job its devices; the worker offers them
            offer += f",{name}={n}"
    if settings.gpus:
        opts["job_extra_directives"] = backends.gpu_directives(
            settings.kind, settings.gpus, opts.get("job_extra_directives")
        )
    return offer
