"""The Dask resources a worker offers and a point's task asks, named once.

A worker advertises ``{CORES: N}`` (the cores it may lease), ``{MEMORY: bytes}`` when it is
packed by memory, and one resource per accelerator kind it holds (``gpu``, ``tpu``: named by
:mod:`sweep.worker.devices`' kinds). A point's task asks ``{CORES: k}`` and, where it applies,
its memory and its accelerator slots: :func:`ask`, the one place that ask is made.

Dask's resource for cores is named ``threads`` (as the recipe's ``resources.threads`` and what
users of ``dask worker --resources threads=N`` know); inside the code it is :data:`CORES`.
"""

from __future__ import annotations

CORES = "threads"
MEMORY = "memory"


def ask(
    cores: int, memory: int | None = None, accelerator: tuple[str, float] | None = None
) -> dict[str, float]:
    """The resources a point's task asks of the scheduler: ``cores``, ``memory`` bytes (None:
    none asked, as of workers that offer no memory) and ``accelerator`` (a resource name and
    the slots asked), e.g. ``{"threads": 2, "memory": 2**30}``."""
    asked: dict[str, float] = {CORES: cores}
    if memory is not None:
        asked[MEMORY] = memory
    if accelerator:
        asked[accelerator[0]] = accelerator[1]
    return asked


def cores(offer: dict[str, float]) -> int:
    """The cores a worker's resources offer (0 when it advertises none)."""
    return int(offer.get(CORES, 0))
