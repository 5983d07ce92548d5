"""Job functions the tests run in real capped children (referenced as tests/jobs.py:NAME)."""

import os
import sys
import time


def jax_grad(n: int = 64, seed: int = 0) -> dict:
    """A jitted gradient through a linear solve; reports whether jax was already imported."""
    warm = "jax" in sys.modules
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(seed), (n, n)) + n * jnp.eye(n)
    g = jax.jit(jax.grad(lambda x: jnp.sum(jnp.linalg.solve(a, x) ** 2)))(jnp.ones(n))
    return {"norm": float(jnp.linalg.norm(g)), "jax_was_loaded": float(warm)}


def affinity(seconds: float = 0.0, x: int = 0) -> dict:
    """Sleeps, then reports the CPUs this process may run on and the capping variables."""
    time.sleep(seconds)
    cpus = sorted(os.sched_getaffinity(0))
    return {
        "ncpus": len(cpus),
        "cpu_sum": sum(cpus),
        "nproc_env": float(os.environ.get("NPROC", "nan")),
        "blas_env": float(os.environ.get("OPENBLAS_NUM_THREADS", "nan")),
    }


def noop(x: int = 0) -> dict:
    return {"x": float(x)}


def square(x: float, offset: float = 0.0, seconds: float = 0.0) -> dict:
    """Deterministic output with a vector and a named-dim output, optionally slow."""
    import numpy as np
    import xarray as xr

    time.sleep(seconds)
    return {
        "y": x * x + offset,
        "vec": np.arange(3) * x,
        "curve": xr.DataArray(np.linspace(0, 1, 4) * x, dims=["t"], coords={"t": [0, 1, 2, 3]}),
    }


def fail_if(x: int, bad: int = 1) -> dict:
    if x == bad:
        raise ValueError(f"x={x} is bad")
    return {"value": float(x)}
