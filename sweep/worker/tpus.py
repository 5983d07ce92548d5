"""TPU points: the TPU kind of device (:data:`TPU`; leases: :mod:`sweep.worker.devices`) and the
chips a node has.

``resources.tpus: n`` asks for n whole chips per point: a chip can't be shared between
processes. It belongs to the process that opened it (libtpu's lock file lives as long as that
process: a second process that asks for it while the first is alive, even idle, fails after
about 2 s with "Internal error when accessing libtpu multi-process lockfile", and does not
fall back to the CPU). So a TPU child holds its chips for its whole life, serves only points
that ask for them, and releases them as it exits; every other child keeps
``JAX_PLATFORMS=cpu`` and never opens the TPU backend.

The chips of a node are its ``/dev/accel*`` devices (TPU v4 and later) or, where the runtime
reaches them through VFIO, the numbered ``/dev/vfio/*`` groups; ``$SWEEP_FAKE_TPUS`` (a count)
replaces the listing, for tests and dry runs on machines without chips. A child on some of a
node's chips is told which (``TPU_VISIBLE_CHIPS``, with one process of one chip's bounds and a
port of its own); a child on all of them is told nothing: the runtime takes the whole host.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from sweep.capacity import accelerators
from sweep.errors import SweepError
from sweep.worker.devices import Device, Kind

FAKE = "SWEEP_FAKE_TPUS"
BASE_PORT = 8476  # libtpu's default process port; a child on chip i takes BASE_PORT + i
DEV = Path("/dev")


def detect(env: Mapping[str, str] | None = None, dev: Path = DEV) -> list[Device]:
    """The chips of this node: ``$SWEEP_FAKE_TPUS`` when set, else ``/dev/accel*``, else the
    numbered ``/dev/vfio/*`` groups (none on a machine without chips)."""
    env = os.environ if env is None else env
    if env.get(FAKE):
        return [Device(str(i), f"fake{i}", "fake chip", 0) for i in range(int(env[FAKE]))]
    accel = sorted(dev.glob("accel[0-9]*"), key=_number)
    found = accel or sorted((p for p in (dev / "vfio").glob("[0-9]*")), key=_number)
    return [Device(str(i), f"{path.name}", "TPU chip", 0) for i, path in enumerate(found)]


def _number(path: Path) -> int:
    digits = re.sub(r"\D", "", path.name)
    return int(digits) if digits else 0


def environ(devices: Sequence[Device], share: float, on_node: int) -> dict[str, str]:
    """What a TPU child's environment says of its chips: nothing when they are all of the
    node's; else which chips it sees, as one process of that many chips, on a port of its own."""
    if len(devices) >= on_node:
        return {}
    first = min(int(d.index) for d in devices)
    port = str(BASE_PORT + first)
    return {
        "TPU_VISIBLE_CHIPS": ",".join(d.index for d in devices),
        "TPU_VISIBLE_DEVICES": ",".join(d.index for d in devices),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": f"1,{len(devices)},1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_PORT": port,
        "TPU_MESH_CONTROLLER_ADDRESS": f"localhost:{port}",
        "TPU_MESH_CONTROLLER_PORT": port,
    }


TPU = Kind.driving(accelerators.TPU, environ=environ, find=detect)


class JaxWithoutTpu(SweepError, RuntimeError):
    """The children's JAX can't use the chips the points ask for."""


def check_jax(platforms: str) -> None:
    """JaxWithoutTpu when ``platforms`` asks for TPUs and this Python's JAX has no libtpu (the
    children run this Python)."""
    if "tpu" not in {p.strip() for p in platforms.split(",")}:
        return
    if importlib.util.find_spec("libtpu") is None:
        raise JaxWithoutTpu(
            f"the children run JAX on {platforms!r}, but this JAX has no TPU support: "
            'pip install -U "jax[tpu]", or set child.platforms: cpu'
        )
