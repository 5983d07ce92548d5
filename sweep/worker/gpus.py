"""GPU points: the GPU kind of device (:data:`GPU`; leases: :mod:`sweep.worker.devices`), the
devices ``nvidia-smi`` finds, and their memory in use.

``resources.gpus: g`` asks for g devices per point: a whole number takes g whole devices; a
fraction 1/m (0.5, 0.25, 1/3 as 0.333...) takes a share of one device, so m points share it.
Each device has ``GPU_SLOTS`` lock files (:mod:`sweep.wire.placement`), files
``gpu-<uuid>-<slot>.lock``: a share ``g`` is ``g * GPU_SLOTS`` of them, a whole number of slots.

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

from sweep.capacity import accelerators
from sweep.errors import SweepError
from sweep.worker.devices import Device, Kind

PREALLOCATED = 0.75  # XLA's default XLA_PYTHON_CLIENT_MEM_FRACTION
FAKE = "SWEEP_FAKE_GPUS"
SMI_TIMEOUT_S = 10.0


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


def environ(devices: Sequence[Device], share: float, on_node: int) -> dict[str, str]:
    """What a GPU child's environment says of its devices: their names in
    ``CUDA_VISIBLE_DEVICES`` and ``HIP_VISIBLE_DEVICES``, and for a share of one device its
    part of the memory XLA preallocates."""
    names = ",".join(d.index for d in devices)
    env = {"CUDA_VISIBLE_DEVICES": names, "HIP_VISIBLE_DEVICES": names}
    if share < 1:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{PREALLOCATED * share:.3f}"
    return env


# the threads CUDA's runtime adds to a child's are not measured here (no GPU machine): none counted
GPU = Kind.driving(accelerators.GPU, environ=environ, find=detect)
