"""The Dask resources a worker offers and a point's task asks, named once.

A worker advertises ``{CORES: N}`` (the cores it may lease), ``{MEMORY: bytes}`` when it is
packed by memory, one resource per accelerator kind it holds (``gpus``, ``tpus``:
:mod:`sweep.capacity.accelerators`) and one per :data:`AMOUNTS` entry it offers. A point's
task asks ``{CORES: k}`` and, where it applies, its memory, its accelerator slots and its
amounts: :func:`ask`, the one place that ask is made; :func:`at_once` is Dask's rule for
how many such tasks a worker runs side by side.

Dask's resource for cores is named ``threads`` (as the recipe's ``resources.threads`` and what
users of ``dask worker --resources threads=N`` know); inside the code it is :data:`CORES`.

Examples
--------
>>> ask(2, 2**30)
{'threads': 2, 'memory': 1073741824}
>>> at_once({"threads": 8, "memory": 3 * 2**30}, ask(2, 2**30))
3
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

CORES = "threads"
MEMORY = "memory"


@dataclass(frozen=True)
class Amount:
    """A resource with nothing to it but how much: a point asks ``resources.<name>``, a worker
    offers ``cluster.<name>`` (the workers of a running scheduler ``--resources <name>=N``), and
    Dask runs a point only on a worker that has that much left beside the points it runs. The
    sweep neither measures nor limits what a point uses of it.

    ``name``: the key under ``resources`` and ``cluster``, and the Dask resource; ``what``: what
    it is, in messages; ``size``: written as bytes (``20GB``), else as a number; ``local``: what
    the local worker offers when ``cluster.<name>`` is not given (None: none)."""

    name: str
    what: str
    size: bool = False
    local: Callable[[], float] | None = None


def _free_disk() -> float:
    """Free bytes of the file system of this process's working directory, where a job's
    relative paths land."""
    import os
    import shutil

    return float(shutil.disk_usage(os.getcwd()).free)


# every Amount: a new one is an entry here (and its line in docs/recipe.md)
_AMOUNTS: tuple[Amount, ...] = (Amount("disk", "disk space", size=True, local=_free_disk),)
AMOUNTS: dict[str, Amount] = {a.name: a for a in _AMOUNTS}


def ask(
    cores: int,
    memory: int | None = None,
    accelerator: tuple[str, float] | None = None,
    amounts: Iterable[tuple[str, float]] = (),
) -> dict[str, float]:
    """The resources a point's task asks of the scheduler: ``cores``, ``memory`` bytes (None:
    none asked, as of workers that offer no memory), ``accelerator`` (a resource name and
    the slots asked) and ``amounts`` (:data:`AMOUNTS` names and how much of each)."""
    asked: dict[str, float] = {CORES: cores}
    if memory is not None:
        asked[MEMORY] = memory
    if accelerator:
        asked[accelerator[0]] = accelerator[1]
    asked.update(amounts)
    return asked


def _each(offer: Mapping[str, float], asked: Mapping[str, float]) -> dict[str, int]:
    """How many tasks asking ``asked`` each resource of ``offer`` holds (cores first)."""
    names = sorted((name for name, amount in asked.items() if amount > 0), key=lambda name: name != CORES)
    return {name: int(offer.get(name, 0) // asked[name]) for name in names}


def at_once(offer: Mapping[str, float], asked: Mapping[str, float]) -> int:
    """How many tasks asking ``asked`` a worker offering ``offer`` runs side by side (Dask's
    rule: each resource asked must be offered that many times over)."""
    return min(_each(offer, asked).values(), default=0)


def limit(offer: Mapping[str, float], asked: Mapping[str, float]) -> str:
    """The resource of ``asked`` that :func:`at_once` is limited by (cores when several are)."""
    each = _each(offer, asked)
    return min(each, key=each.__getitem__)


def cores(offer: Mapping[str, float]) -> int:
    """The cores a worker's resources offer (0 when it advertises none)."""
    return int(offer.get(CORES, 0))


def shown(name: str, value: float) -> str:
    """An amount of resource ``name`` as a person reads it: bytes as ``2.00 GiB``, else ``1.5``."""
    if name == MEMORY or (name in AMOUNTS and AMOUNTS[name].size):
        from dask.utils import format_bytes

        return format_bytes(int(value))
    return f"{value:g}"
