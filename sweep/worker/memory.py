"""What the local worker offers of this machine's memory (the packing itself:
:mod:`sweep.capacity.memory`)."""

from __future__ import annotations

import psutil

from sweep.capacity.memory import margin, size


def local_offer(given: str | int | None = None) -> int:
    """What the local worker offers: ``given`` (``cluster.memory``), else the memory available
    now less :func:`~sweep.capacity.memory.margin`."""
    if given is not None:
        return size(given)
    vm = psutil.virtual_memory()
    return max(0, int(vm.available) - margin(int(vm.total)))
