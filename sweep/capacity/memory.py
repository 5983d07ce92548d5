"""Packing by memory as well as cores: what a point asks, how many fit a worker.

Every worker of a local or batch cluster advertises a Dask resource ``memory`` (bytes) beside
``threads``: the local worker the machine's available memory when the cluster starts, less
``MARGIN`` (1 GiB or a tenth of the machine, whichever is more, for the driver, the
scheduler and the worker itself), or ``cluster.memory`` when given; a batch worker its job's
``cluster.memory``; a ``kind: address`` worker what its ``--resources threads=N,memory=BYTES``
says (none: then points are placed by cores only). A point asks ``memory`` =
``resources.memory``, so Dask never runs more points on a worker than fit in both its cores
and its memory. Without ``resources.memory`` points ask none until some have ended: from then
on they ask :func:`learned_ask` of the peak RSS measured so far (``LEARN_FACTOR`` times the
largest), up to the largest worker's memory.
"""

from __future__ import annotations

import math

from dask.utils import format_bytes, parse_bytes

LEARN_FACTOR = 1.25
MIB = 1 << 20


def margin(total: int) -> int:
    """Memory left out of the local worker's offer: 1 GiB or a tenth of ``total``."""
    return max(1 << 30, total // 10)


def size(value: str | int) -> int:
    """Bytes from ``"120GiB"``, ``"600MB"`` or a number."""
    return int(value) if isinstance(value, int) else int(parse_bytes(value))


def learned_ask(largest_peak: int, most: int | None = None) -> int | None:
    """What points ask once some have ended: ``LEARN_FACTOR`` times the largest peak RSS seen
    (rounded up to a MiB), at most ``most``; None before any peak is known (0)."""
    if largest_peak <= 0:
        return None
    ask = math.ceil(largest_peak * LEARN_FACTOR / MIB) * MIB
    return ask if most is None else min(ask, most)


def shown(n: int | None) -> str:
    return "unknown" if n is None else format_bytes(n)
