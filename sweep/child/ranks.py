"""``sweep.rank()`` and ``sweep.ranks()``: which MPI rank of a point this process is.

A point with ``resources.ranks: n`` runs its job on n MPI ranks (:mod:`sweep.worker.mpi`); each rank
calls the job function with the same parameters, as ``mpirun -np n python script.py`` would.
These read the launcher's environment (Open MPI's ``OMPI_COMM_WORLD_RANK``/``_SIZE``, MPICH's
and Slurm's ``PMI_RANK``/``PMI_SIZE``, PMIx's ``PMIX_RANK``), so a job learns its rank without
importing mpi4py; outside MPI they say rank 0 of 1. Standard library only: the bootstrap
reads them before it pins the process.
"""

from __future__ import annotations

import os

__all__ = ["rank", "ranks"]

RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def _first(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return default


def rank() -> int:
    """This process's MPI rank (0 outside MPI)."""
    return _first(RANK_VARS, 0)


def ranks() -> int:
    """How many ranks the point runs on (1 outside MPI)."""
    return _first(SIZE_VARS, 1)


def my_cores(groups: str) -> str:
    """This rank's cores from ``groups``, the cores of every rank in rank order separated by
    ``/`` (``"0,1/2,3"``: rank 0 on 0 and 1, rank 1 on 2 and 3); a single group is everyone's."""
    parts = groups.split("/")
    return parts[rank() % len(parts)]
