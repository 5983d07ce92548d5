"""Accelerators a point may lease, GPUs and TPUs alike: found on a node, leased node-wide like
cores, and what a child's environment says of them.

Each device has ``kind.slots`` lock files in the node's lease folder
(:mod:`sweep.worker.leases`, files ``<prefix>-<key>-<slot>.lock``): a whole device is all its
slots, a share of one some of them, so the leases of every sweep and worker of the user on the
node exclude each other exactly. A kind of device is a :class:`Kind`, a few attributes, the
way a batch system is a few attributes of dask-jobqueue's ``Job``: :data:`sweep.worker.gpus.GPU`
and :data:`sweep.worker.tpus.TPU`. Where they differ:

* a GPU can be shared (``slots`` 12: shares of 1/2 ... 1/12); a TPU chip can't (``slots`` 1);
* a GPU child holds its device slots for each job and is reused only when they are free
  again; a TPU chip belongs to the *process* that opened it (libtpu's lock file lives as long
  as that process), so a TPU child holds its chips for its whole life (``for_life``), and
  releases them as it exits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sweep.capacity.accelerators import Accelerator
from sweep.worker.leases import NodeLocks


@dataclass(frozen=True)
class Device:
    """One device as this process sees it: ``index`` (what the runtime's visibility variable
    names), ``key`` (node-wide identity), ``name`` and ``memory`` (bytes, 0 when unknown)."""

    index: str
    key: str
    name: str
    memory: int


@dataclass(frozen=True)
class Kind(Accelerator):
    """A kind of accelerator as this worker drives it: its descriptor
    (:class:`~sweep.capacity.accelerators.Accelerator`: recipe key, noun, platform, slots,
    for-life, runtime threads, host cores) and the two things only a node can do: ``environ(devices,
    share, on_node)``, what a child's environment says of the devices it holds (``on_node``:
    how many the node has), and ``find()``, the devices this process may use.
    """

    environ: Callable[[Sequence[Device], float, int], dict[str, str]] = field(compare=False)
    find: Callable[[], list[Device]] = field(compare=False)

    @classmethod
    def driving(
        cls,
        accelerator: Accelerator,
        environ: Callable[[Sequence[Device], float, int], dict[str, str]],
        find: Callable[[], list[Device]],
    ) -> Kind:
        """The driver of ``accelerator``: its descriptor with ``environ`` and ``find``."""
        return cls(
            **{f: getattr(accelerator, f) for f in accelerator.__dataclass_fields__},
            environ=environ,
            find=find,
        )


@dataclass
class Held:
    """Slots held on some devices; :meth:`release` (or this process's death) frees them."""

    kind: Kind
    devices: tuple[Device, ...]
    share: float
    held: list[tuple[Device, tuple[int, ...]]]
    leases: DeviceLeases | None = None

    @property
    def amount(self) -> float:
        """What a point asking for these holds: the share of one device, or the devices."""
        return self.share if self.share < 1 else float(len(self.devices))

    def release(self) -> None:
        if self.leases is not None:
            for device, ids in self.held:
                self.leases.release(device, ids)
            self.held = []

    def environ(self) -> dict[str, str]:
        """What the child's environment says of these devices (set before JAX loads)."""
        on_node = len(self.leases.devices) if self.leases is not None else len(self.devices)
        return self.kind.environ(self.devices, self.share, on_node)


class DeviceLeases:
    """This process's handles on the node's slots of devices of one kind, one
    :class:`NodeLocks` per device. It never asks again for a slot it holds (a second ``flock``
    by the same open file would succeed): those are kept in ``mine``."""

    def __init__(self, kind: Kind, devices: Sequence[Device], folder: Path | None = None) -> None:
        self.kind = kind
        self.devices = list(devices)
        prefix = kind.resource.rstrip("s")
        self._locks = {d.key: NodeLocks(folder, prefix=f"{prefix}-{d.key}") for d in self.devices}
        self.mine: dict[str, set[int]] = {d.key: set() for d in self.devices}

    def hold_as(self, amount: float, what: str, held: Held | None = None) -> tuple[bool, Held | None]:
        """(whether they were free, the device slots) for a point asking ``amount`` (none asked:
        (True, None)); for a warm child that ``held`` devices, those devices only: its
        environment names them (a child that holds them for life has them already)."""
        if not amount:
            return True, None
        if held is not None and self.kind.for_life:
            return held.amount == amount, held if held.amount == amount else None
        mine = held.devices if held is not None else ()
        device = self.hold(amount, what, prefer=mine)
        if device is not None and mine and device.devices != mine:
            device.release()
            return False, None
        return device is not None, device

    def hold(self, amount: float, holder: str, prefer: Iterable[Device] = ()) -> Held | None:
        """Slots for a point asking ``amount`` (devices in ``prefer`` first), or None when the
        node has too few free now."""
        count, each = self.kind.split(amount)
        first = list(prefer)
        order = first + [d for d in self.devices if d not in first]
        got: list[tuple[Device, tuple[int, ...]]] = []
        for device in order:
            if len(got) == count:
                break
            free = [i for i in range(self.kind.slots) if i not in self.mine[device.key]]
            held = self._locks[device.key].hold(free, each, holder)
            if held is not None:
                got.append((device, held.cores))
                self.mine[device.key] |= set(held.cores)
        found = Held(self.kind, tuple(d for d, _ in got), min(1.0, amount), got, self)
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


def plan_text(kind: Kind, devices: Sequence[Device], amount: float) -> str:
    """How many points asking ``amount`` the devices run at once, for ``sweep doctor``."""
    if not devices:
        return "no devices"
    at_once = kind.points_at_once(len(devices), amount)
    return f"{at_once} points of {kind.resource}={amount:g} at once on {len(devices)} device(s)"


class NodeDevices:
    """A worker's leases of each kind of accelerator (``kinds``: recipe key -> kind), on the
    devices of each kind this process may use."""

    def __init__(self, kinds: Mapping[str, Kind]) -> None:
        self.leases = {name: DeviceLeases(kind, kind.find()) for name, kind in kinds.items()}

    def check(self, wanted: tuple[str, float] | None, where: str) -> None:
        """ValueError, naming the fix, when a point asks for more devices than ``where`` has."""
        if wanted is not None and math.ceil(wanted[1]) > len(self.leases[wanted[0]].devices):
            name, have = wanted[0], len(self.leases[wanted[0]].devices)
            raise ValueError(
                f"a job asks for {name}={wanted[1]:g} but worker {where} has {have}; "
                f"lower resources.{name} or run on nodes with them (cluster.{name})"
            )

    def hold(
        self, wanted: tuple[str, float] | None, what: str, mine: Held | None = None
    ) -> tuple[bool, Held | None]:
        """(whether they were free, the slots) of the devices a point asks for (none: (True, None));
        see :meth:`DeviceLeases.hold_as`."""
        if wanted is None:
            return True, None
        return self.leases[wanted[0]].hold_as(wanted[1], what, mine)

    def kept_for_life(self, wanted: tuple[str, float] | None) -> Kind | None:
        """The kind ``wanted`` asks for when a child holds such devices for its whole life."""
        kind = None if wanted is None else self.leases[wanted[0]].kind
        return kind if kind is not None and kind.for_life else None

    def close(self) -> None:
        for leases in self.leases.values():
            leases.close()
