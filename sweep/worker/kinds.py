"""The drivers of the kinds of accelerator, by their recipe key: one table, as submitit maps
generic names to each backend's (:mod:`sweep.worker.devices`; their descriptors are
:mod:`sweep.capacity.accelerators`')."""

from __future__ import annotations

from sweep.worker.devices import Kind
from sweep.worker.gpus import GPU
from sweep.worker.tpus import TPU

KINDS: dict[str, Kind] = {kind.resource: kind for kind in (GPU, TPU)}
