"""How a capped child is started: :class:`ChildConfig`, and the environment it makes.

Standard library only: the config travels in every :class:`~sweep.wire.task.PointTask` and is
part of a store's inputs (:mod:`sweep.model.inputs`). For a lease of ``k`` cores with capping
on (the default) the environment says:

* ``NPROC`` and ``PJRT_NPROC`` = k: sizes XLA's PjRt client and Eigen pools, one compute
  thread per leased core;
* at k = 1, ``SWEEP_JAX_CONFIG`` (``JAX_CONFIG_VAR``) = ``ONE_CORE_JAX_CONFIG``: XLA runs each
  computation on the thread that calls it, not on its one pool thread, which a host
  callback (``jax.pure_callback``) would otherwise wait on from inside that thread's own
  computation, for ever (docs/threads.md, "Host callbacks on one core"); the child sets it
  right after ``import jax`` (:mod:`sweep.child.jaxsettings`: JAX reads no variable for it);
* each of ``CAPPED_TO_ONE`` (OpenBLAS, OpenMP, MKL, numexpr, vecLib, BLIS) = 1;
* ``ALLOCATOR_THREADS_OFF`` (pyarrow's jemalloc, which a job that imports xarray or pandas
  loads, starts no background thread) unless already set;
* ``JAX_PLATFORMS=cpu`` unless the config names other platforms;
* ``JAX_COMPILATION_CACHE_DIR`` (shared by every child of a sweep) with
  ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0`` when a compile cache is configured.

With capping off the variables the Dask nanny sets for its workers (``NANNY_VARS``) are
removed, so the child behaves like a plain ``python`` started by a job array.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CAPPED_TO_ONE = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "BLIS_NUM_THREADS",
)
# Set by distributed's nanny in every worker (distributed.nanny.pre-spawn-environ).
NANNY_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_")
# Background threads of allocators bundled by libraries a job may import (pyarrow's jemalloc,
# pulled in by xarray -> pandas): one thread each that no CPU count sizes, switched off.
ALLOCATOR_THREADS_OFF = {"JE_ARROW_MALLOC_CONF": "background_thread:false"}
MULTIPLYING_FLAGS = ("--xla_force_host_platform_device_count",)
MULTIPLYING_VARS = ("JAX_NUM_CPU_DEVICES",)
# JAX flags no environment variable sets, as name=value,...: the child sets them after `import jax`
JAX_CONFIG_VAR = "SWEEP_JAX_CONFIG"
ONE_CORE_JAX_CONFIG = "jax_cpu_enable_async_dispatch=false"


def without_multipliers(env: dict[str, str]) -> dict[str, str]:
    """``env`` less what makes one JAX process hold several CPU devices: the
    ``--xla_force_host_platform_device_count`` token of ``XLA_FLAGS`` and ``JAX_NUM_CPU_DEVICES``.
    Each device brings its own PjRt threads, so a user's shell setting would break the budget."""
    flags = env.get("XLA_FLAGS", "").split()
    kept = [f for f in flags if not f.startswith(MULTIPLYING_FLAGS)]
    if len(kept) != len(flags):
        env["XLA_FLAGS"] = " ".join(kept)
        if not kept:
            del env["XLA_FLAGS"]
    for name in MULTIPLYING_VARS:
        env.pop(name, None)
    return env


def multipliers(env: Mapping[str, str]) -> list[str]:
    """The settings in ``env`` that :func:`without_multipliers` drops, for a warning."""
    found = [f for f in env.get("XLA_FLAGS", "").split() if f.startswith(MULTIPLYING_FLAGS)]
    return found + [f"{n}={env[n]}" for n in MULTIPLYING_VARS if n in env]


def default_compile_cache() -> str:
    """``$SWEEP_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/sweep/jax`` (``~/.cache/sweep/jax``)."""
    if os.environ.get("SWEEP_COMPILE_CACHE"):
        return os.environ["SWEEP_COMPILE_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "sweep" / "jax")


@dataclass(frozen=True)
class ChildConfig:
    """How children are started. Hashable: children with equal configs are interchangeable."""

    cap: bool = True
    compile_cache: str | None = None
    platforms: str = "cpu"
    env: tuple[tuple[str, str], ...] = ()
    mpirun: str = ""  # the MPI launcher's command; "" finds mpirun on PATH
    # whether its jobs may use JAX (sweep.model.job.may_use_jax): a child for jobs that don't is never
    # prewarmed with it and, its config differing, never serves a JAX job that would load it
    jax: bool = True

    def environ(self, cores: Sequence[int], base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's full environment for a lease of ``cores``.

        Inherited settings that multiply XLA's CPU devices (and with them its pools) are
        dropped (:func:`without_multipliers`); ``child.env`` may set them on purpose.
        """
        env = without_multipliers(dict(os.environ if base is None else base))
        for name in NANNY_VARS:
            env.pop(name, None)
        if self.cap:
            k = str(len(cores))
            env.update({"NPROC": k, "PJRT_NPROC": k})
            if len(cores) == 1:
                env[JAX_CONFIG_VAR] = ONE_CORE_JAX_CONFIG
            env.update(dict.fromkeys(CAPPED_TO_ONE, "1"))
            env.update({name: value for name, value in ALLOCATOR_THREADS_OFF.items() if name not in env})
        if self.platforms:
            env["JAX_PLATFORMS"] = self.platforms
        if self.compile_cache:
            env["JAX_COMPILATION_CACHE_DIR"] = self.compile_cache
            env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env.update(dict(self.env))
        return env
