"""The kinds of accelerator a point may ask for, by their recipe key: one table, as submitit
maps generic names to each backend's (:mod:`sweep.worker.devices`)."""

from __future__ import annotations

from sweep.wire.placement import Placement
from sweep.worker.devices import Kind
from sweep.worker.gpus import GPU
from sweep.worker.tpus import TPU

KINDS: dict[str, Kind] = {kind.resource: kind for kind in (GPU, TPU)}


def asked(placement: Placement) -> tuple[Kind, float] | None:
    """(the kind, how many) of the accelerator a point at ``placement`` asks for, if any."""
    wanted = placement.accelerator
    return None if wanted is None else (KINDS[wanted[0]], wanted[1])
