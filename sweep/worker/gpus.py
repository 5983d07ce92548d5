"""GPU points: devices found on a node, leased node-wide like cores, and a child's view of them.

``resources.gpus: g`` asks for g devices per point: a whole number takes g whole devices; a
fraction 1/m (0.5, 0.25, 1/3 as 0.333...) takes a share of one device, so m points share it.
Each device has ``GPU_SLOTS`` lock files (:mod:`sweep.wire.placement`) in the node's lease folder
(:mod:`sweep.worker.leases`, files
``gpu-<uuid>-<slot>.lock``): a whole device is all its slots, a share ``g`` is ``g * SLOTS``
of them, so whole and shared leases of every sweep and worker of the user on the node
exclude each other exactly. A share must be a whole number of slots.

The child of a GPU point is started with ``CUDA_VISIBLE_DEVICES`` (and ROCm's
``HIP_VISIBLE_DEVICES``) naming its devices, before JAX loads; a share also gets
``XLA_PYTHON_CLIENT_MEM_FRACTION`` = 0.75 × the share (XLA preallocates 75% of each visible
device by default: two children on one device would each ask for 75% of it) and
``JAX_PLATFORMS`` follows (``cuda`` when ``child.platforms`` is not set). The devices a worker
has are what ``nvidia-smi`` lists, within the worker's own ``CUDA_VISIBLE_DEVICES`` when the
batch system set it; ``$SWEEP_FAKE_GPUS`` (``N`` or ``NxSIZE``, e.g. ``2x80GiB``) replaces the
listing, for tests and dry runs on machines without devices. A running point's device memory
is read from ``nvidia-smi --query-compute-apps`` for the processes of its tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweep.errors import SweepError
from sweep.wire.placement import GPU_SLOTS as SLOTS
from sweep.wire.placement import gpu_slots as slots
from sweep.worker.leases import NodeLocks

RESOURCE = "gpus"
PREALLOCATED = 0.75  # XLA's default XLA_PYTHON_CLIENT_MEM_FRACTION
FAKE = "SWEEP_FAKE_GPUS"
SMI_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Device:
    """One device as this process sees it: ``index`` (what ``CUDA_VISIBLE_DEVICES`` names),
    ``key`` (node-wide identity: its UUID), ``name`` and ``memory`` (bytes)."""

    index: str
    key: str
    name: str
    memory: int


def _fake(spec: str) -> list[Device]:
    count, _, size = spec.partition("x")
    from dask.utils import parse_bytes

    memory = int(parse_bytes(size)) if size else 16 << 30
    return [Device(str(i), f"fake{i}", "fake device", memory) for i in range(int(count))]


def parse_smi(text: str) -> list[Device]:
    """Devices from ``nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits``."""
    found = []
    for line in text.strip().splitlines():
        index, uuid, name, mib = (part.strip() for part in line.split(","))
        found.append(Device(index, uuid, name, int(float(mib)) << 20))
    return found


def detect(env: Mapping[str, str] | None = None) -> list[Device]:
    """The devices this process may use: ``$SWEEP_FAKE_GPUS`` when set, else ``nvidia-smi``'s
    listing (none without it), within ``CUDA_VISIBLE_DEVICES`` when that is set."""
    env = os.environ if env is None else env
    devices = _fake(env[FAKE]) if env.get(FAKE) else _listed()
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return devices
    allowed = [v.strip() for v in visible.split(",") if v.strip()]
    return [d for d in devices if d.index in allowed or d.key in allowed]


def _listed() -> list[Device]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    query = [smi, "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_smi(out.stdout) if out.returncode == 0 else []


@dataclass
class GpuHeld:
    """Slots held on some devices; :meth:`release` (or this process's death) frees them."""

    devices: tuple[Device, ...]
    share: float
    held: list[tuple[Device, tuple[int, ...]]]
    leases: GpuLeases | None = None

    def release(self) -> None:
        if self.leases is not None:
            for device, ids in self.held:
                self.leases.release(device, ids)

    def environ(self) -> dict[str, str]:
        """What the child's environment says of these devices (set before JAX loads)."""
        names = ",".join(d.index for d in self.devices)
        env = {"CUDA_VISIBLE_DEVICES": names, "HIP_VISIBLE_DEVICES": names}
        if self.share < 1:
            env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{PREALLOCATED * self.share:.3f}"
        return env


class GpuLeases:
    """This process's handles on the node's device slots, one :class:`NodeLocks` per device.
    It never asks again for a slot it holds (a second ``flock`` by the same open file would
    succeed): those are kept in ``mine``."""

    def __init__(self, devices: Sequence[Device], folder: Path | None = None) -> None:
        self.devices = list(devices)
        self._locks = {d.key: NodeLocks(folder, prefix=f"gpu-{d.key}") for d in self.devices}
        self.mine: dict[str, set[int]] = {d.key: set() for d in self.devices}

    def hold_as(self, gpus: float, what: str, held: GpuHeld | None = None) -> tuple[bool, GpuHeld | None]:
        """(whether they were free, the device slots) for a point asking ``gpus`` (none asked:
        (True, None)); for a warm child that ``held`` devices, those devices only: its
        environment names them."""
        if not gpus:
            return True, None
        mine = held.devices if held is not None else ()
        device = self.hold(gpus, what, prefer=mine)
        if device is not None and mine and device.devices != mine:
            device.release()
            return False, None
        return device is not None, device

    def hold(self, gpus: float, holder: str, prefer: Iterable[Device] = ()) -> GpuHeld | None:
        """Slots for a point asking ``gpus`` (devices in ``prefer`` first), or None when the
        node has too few free now."""
        count, each = slots(gpus)
        first = list(prefer)
        order = first + [d for d in self.devices if d not in first]
        got: list[tuple[Device, tuple[int, ...]]] = []
        for device in order:
            if len(got) == count:
                break
            free = [i for i in range(SLOTS) if i not in self.mine[device.key]]
            held = self._locks[device.key].hold(free, each, holder)
            if held is not None:
                got.append((device, held.cores))
                self.mine[device.key] |= set(held.cores)
        found = GpuHeld(tuple(d for d, _ in got), min(1.0, gpus), got, self)
        if len(got) < count:
            found.release()
            return None
        return found

    def release(self, device: Device, ids: tuple[int, ...]) -> None:
        self._locks[device.key].release(ids)
        self.mine[device.key] -= set(ids)

    def close(self) -> None:
        for locks in self._locks.values():
            locks.close()


class JaxWithoutCuda(SweepError, RuntimeError):
    """The children's JAX can't use the devices the points ask for."""


CUDA_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_rocm7_plugin", "jax_rocm60_plugin")


def check_jax(platforms: str) -> None:
    """JaxWithoutCuda, naming the package, when ``platforms`` asks for CUDA or ROCm and this
    Python's JAX has no plugin for it (the children run this Python)."""
    wanted = {p.strip() for p in platforms.split(",")}
    if not wanted & {"cuda", "gpu", "rocm"}:
        return
    import importlib.util

    if any(importlib.util.find_spec(name) is not None for name in CUDA_PLUGINS):
        return
    raise JaxWithoutCuda(
        f"the children run JAX on {platforms!r}, but this JAX has no GPU support: "
        'pip install -U "jax[cuda12]" (or "jax[cuda13]"; ROCm: "jax[rocm]"), or set child.platforms: cpu'
    )


def used_memory(pids: Iterable[int]) -> int:
    """Device memory (bytes) the processes ``pids`` hold now, by ``nvidia-smi``; 0 without it."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    query = [smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return apps_memory(out.stdout, set(pids))


def apps_memory(text: str, pids: set[int]) -> int:
    """Bytes of the ``pid, used_memory`` (MiB) lines of ``text`` whose pid is in ``pids``."""
    total = 0
    for line in text.strip().splitlines():
        pid, _, mib = line.partition(",")
        if pid.strip().isdigit() and int(pid) in pids and mib.strip().replace(".", "").isdigit():
            total += int(float(mib)) << 20
    return total


def plan_text(devices: Sequence[Device], gpus: float) -> str:
    """How many points asking ``gpus`` the devices run at once, for ``sweep doctor``."""
    if not devices:
        return "no devices"
    return f"{points_at_once(len(devices), gpus)} points of gpus={gpus:g} at once on {len(devices)} device(s)"


def points_at_once(devices: int, gpus: float) -> int:
    """How many points asking ``gpus`` run at once on ``devices`` devices."""
    count, each = slots(gpus)
    return devices // count if gpus >= 1 else devices * (SLOTS // each)
