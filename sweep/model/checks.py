"""Checks of a whole recipe that no single key can make: the output can be written, a point's
attempts fit the batch walltime, an MPI point has a wall-time limit, a local worker offers no
more memory than the machine has. Each refusal is a :class:`~sweep.model.recipe.RecipeError` naming
what, where and how to fix it; each doubt a :class:`~sweep.errors.SweepWarning`.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from dask.utils import parse_bytes

from sweep.errors import RecipeError, SweepWarning

if TYPE_CHECKING:
    from sweep.model.recipe import Recipe


def check(recipe: Recipe, output: Path, source: str) -> None:
    """Every check, in order; ``source`` names the recipe in messages."""
    _check_writable(output, source)
    _check_walltime(recipe, source)
    _check_mpi_timeout(recipe, source)
    _check_local_memory(recipe, source)


def _check_walltime(recipe: Recipe, source: str) -> None:
    """Refuse a walltime that is no time, and points whose ``expected`` attempts can't fit in a
    batch job (no worker would ever start them: each retires at once, and its replacement has
    the same walltime); warn when a point's attempts can outlast their batch job."""
    r, walltime = recipe.resources, recipe.cluster.jobqueue_options.get("walltime")
    if not walltime:
        return
    from sweep.model.backends import walltime_seconds

    limit = walltime_seconds(recipe.cluster.kind, walltime)
    if limit is None and recipe.cluster.cluster_kind.backend.walltime_unit_s is not None:
        raise RecipeError(
            f"{source}: cluster.walltime: {walltime!r} is not a time {recipe.cluster.kind} reads; "
            "write e.g. 01:00:00"
        )
    if limit is None:
        return  # a batch system whose walltimes this project does not read (HTCondor): it will say
    if limit <= 0:
        raise RecipeError(f"{source}: cluster.walltime: {walltime!r} is no time; write e.g. 01:00:00")
    attempts = r.retries + 1
    if r.expected and r.expected * attempts > limit:
        raise RecipeError(
            f"{source}: resources.expected {r.expected:g} s x (retries {r.retries} + 1) = "
            f"{r.expected * attempts:g} s is longer than cluster.walltime {walltime} ({limit:g} s): no batch "
            "job could start such a point. Raise cluster.walltime, or lower resources.expected or retries"
        )
    worst = (r.timeout or 0) * attempts
    if worst > limit:
        warnings.warn(
            f"{source}: resources.timeout {r.timeout:g} s x (retries {r.retries} + 1) = {worst:g} s is "
            f"longer than cluster.walltime {walltime} ({limit:g} s): a point's attempts all run in one "
            "batch job, which can end first. Lower resources.timeout or retries, or raise cluster.walltime",
            SweepWarning,
            stacklevel=5,
        )


def _check_mpi_timeout(recipe: Recipe, source: str) -> None:
    """Warn when an MPI point has no limit that would end a hung rank: no stall watch (the
    watch judges each rank on its own CPU time), no timeout and no expected time."""
    r = recipe.resources
    if r.ranks > 1 and r.stall is None and r.timeout is None and r.expected is None:
        warnings.warn(
            f"{source}: an MPI point (resources.ranks {r.ranks}) has resources.stall off and neither "
            "resources.timeout nor resources.expected: a hung rank would hold its cores for ever. Set "
            "resources.stall, resources.expected (the timeout is then 3x it) or resources.timeout",
            SweepWarning,
            stacklevel=5,
        )


def _check_local_memory(recipe: Recipe, source: str) -> None:
    """Warn when the local worker is to offer more memory than this machine has."""
    c = recipe.cluster
    if not c.cluster_kind.is_local or c.memory is None:
        return
    import psutil

    total = psutil.virtual_memory().total
    if parse_bytes(c.memory) > total:  # a size: the recipe model checked it
        warnings.warn(
            f"{source}: cluster.memory {c.memory} is more than this machine's {total / 2**30:.1f} GiB: "
            "points are packed as if it were there, and can run out of memory together. Give at most "
            "what the machine has, or leave cluster.memory out (the memory available, less a margin)",
            SweepWarning,
            stacklevel=5,
        )


def _check_writable(output: Path, source: str) -> None:
    probe = output.resolve()
    while not probe.exists():
        probe = probe.parent
    if probe == output.resolve() and not probe.is_dir():
        raise RecipeError(f"{source}: output: {output} exists and is not a directory; pick another path")
    try:  # a real write: os.access() says yes to root even on read-only file systems
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise RecipeError(
            f"{source}: output: cannot write under {probe} ({exc.strerror}); choose another output path"
        ) from None
