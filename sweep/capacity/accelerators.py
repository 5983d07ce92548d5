"""The kinds of accelerator a point may ask for, as descriptors: what the plan, the pre-run
checks and the cluster's words need to know of GPUs and TPUs, without finding any.

An :class:`Accelerator` is a few attributes: its recipe key (also its Dask resource and
cluster key), its noun, the JAX platform its children run on, how many lock files (slots)
each device has, whether a child holds its devices for its whole life, the threads its
runtime adds to a child's and the cores its host runtime keeps busy (leased with it). Finding
devices on a node and what a child's environment says of them are the worker's
(:mod:`sweep.worker.devices`: a driver per descriptor, registered by its key in
:mod:`sweep.worker.kinds`).

Examples
--------
>>> GPU.points_at_once(2, 0.5), TPU.points_at_once(4, 2)
(4, 2)
>>> host_cores(gpus=0.5, tpus=0), host_cores(gpus=0, tpus=1)
(0, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweep.wire.placement import GPU_SLOTS, GPUS, TPUS, Placement, gpu_slots

# threads a TPU point's budget adds to a CPU child's 12 + 5k for libtpu's own: a TPU child held at
# most 131 threads at k = 1 (114 over 17) and 124 at k = 2 on a TPU v5e, JAX 0.10.2
# (benchmarks/tpu_points.py; docs/threads.md); 140 leaves room for another libtpu's few more
TPU_RUNTIME_THREADS = 140
# cores a TPU chip's host runtime keeps busy beside the point's own (compile, transfers, the
# runtime's ~110 threads), leased with the chip so CPU points beside it keep theirs. On the
# TPU machine a TPU child used 0.94 s of CPU a second of wall on average, in bursts; with no
# cores of its own, CPU points beside it took 1.38x their time alone, with these two 0.995x
# (benchmarks/tpu_points.py --repeat 3: tpu_host_cores_busy, cpu_beside_tpu_ratio)
TPU_HOST_CORES = 2


@dataclass(frozen=True)
class Accelerator:
    """A kind of accelerator (see the module docstring)."""

    resource: str
    noun: str
    platform: str
    slots: int
    for_life: bool
    runtime_threads: int
    host_cores: int  # cores each device's host runtime keeps busy, leased with the device

    def split(self, amount: float) -> tuple[int, int]:
        """(devices, slots on each) a point asking ``amount`` holds."""
        if self.slots == 1:
            if amount != int(amount) or amount < 1:
                raise ValueError(f"resources.{self.resource}={amount:g}: whole devices only")
            return int(amount), 1
        return gpu_slots(amount)

    def points_at_once(self, devices: int, amount: float) -> int:
        """How many points asking ``amount`` run at once on ``devices`` devices."""
        count, each = self.split(amount)
        return devices // count if amount >= 1 else devices * (self.slots // each)


GPU = Accelerator(GPUS, "GPU", "cuda", GPU_SLOTS, for_life=False, runtime_threads=0, host_cores=0)
TPU = Accelerator(
    TPUS, "TPU chip", "tpu", 1, for_life=True, runtime_threads=TPU_RUNTIME_THREADS, host_cores=TPU_HOST_CORES
)
ACCELERATORS: dict[str, Accelerator] = {a.resource: a for a in (GPU, TPU)}


def host_cores(gpus: float, tpus: int) -> int:
    """Cores leased beside a point's own for the host runtimes of the devices it asks for
    (:attr:`Accelerator.host_cores` each; a share of a GPU counts as the device)."""
    return GPU.host_cores * math.ceil(gpus) + TPU.host_cores * tpus


def asked(placement: Placement) -> tuple[Accelerator, float] | None:
    """(the kind, how many) of the accelerator a point at ``placement`` asks for, if any."""
    wanted = placement.accelerator
    return None if wanted is None else (ACCELERATORS[wanted[0]], wanted[1])
