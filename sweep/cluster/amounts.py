"""What a cluster's workers offer of the plain amounts (:data:`sweep.capacity.resources.AMOUNTS`)
and whether a point's ask of them can fit, before any worker starts.

A local worker offers ``cluster.<name>``, else the amount's ``local`` default (none without
one); a batch job's worker offers ``cluster.<name>`` (none without it); the workers of a
running scheduler offer what they were started with, which the scheduler tells
(:func:`sweep.cluster.clusters.check_fits`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweep.capacity.resources import AMOUNTS, shown
from sweep.errors import SweepError
from sweep.wire.placement import Placement


class AmountError(SweepError, ValueError):
    """A point asks more of an amount than a worker of the cluster offers; the message says
    how to fix it."""


def offered(settings: Any) -> dict[str, float]:
    """What one worker of ``settings`` offers of each amount (nothing for ``kind: address``,
    whose workers say it themselves)."""
    if settings.cluster_kind.is_address:
        return {}
    return local_offers(settings.amounts) if settings.cluster_kind.is_local else dict(settings.amounts)


def local_offers(given: Mapping[str, float]) -> dict[str, float]:
    """What the local worker offers of each amount: ``given`` (its ``cluster`` key), else the
    amount's local default, if it has one."""
    found = {name: a.local() for name, a in AMOUNTS.items() if name not in given and a.local is not None}
    return {**given, **found}


def batch_offer(settings: Any) -> str:
    """The ``--resources`` entries of a batch job's worker for its amounts (``,disk=N``...)."""
    return "".join(f",{name}={_exact(value)}" for name, value in offered(settings).items())


def _exact(value: float) -> str:
    """``value`` as the worker's command line reads it back exactly (bytes as a whole number)."""
    return str(int(value)) if value.is_integer() else repr(value)


def preflight(settings: Any, where: Placement, worker: str) -> None:
    """A point at ``where`` needs a worker (``worker``, in words) that offers each amount it
    asks; AmountError naming the key and the fix otherwise."""
    if settings.cluster_kind.is_address:
        return
    offers = offered(settings)
    for name, asked in where.amounts:
        have = offers.get(name)
        if have is None:
            raise AmountError(
                f"resources.{name}={shown(name, asked)} but {worker} offers no {AMOUNTS[name].what}; "
                f"give cluster.{name} (what each worker offers) or drop resources.{name}"
            )
        if asked > have:
            raise AmountError(
                f"resources.{name}={shown(name, asked)} but {worker} offers {shown(name, have)}; "
                f"lower resources.{name} or raise cluster.{name}"
            )
