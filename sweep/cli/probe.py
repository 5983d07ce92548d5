"""A small JAX workload for measuring a child's threads (``sweep doctor``, benchmarks).

Module level is standard library only: a capped child imports this right after pinning.
"""

from __future__ import annotations


def jax_grad(n: int = 64, seed: int = 0) -> dict:
    """Compile and run a gradient through a linear solve; returns the gradient's norm, and how
    long this child's ``import jax`` took (``import_jax_s``) and the part of it spent loading
    ``ml_dtypes`` (``ml_dtypes_s``; imported first, after numpy, as jax would), in seconds:
    zero where the child had imported them before."""
    import time

    t0 = time.perf_counter()
    import numpy  # noqa: F401

    t1 = time.perf_counter()
    import ml_dtypes  # noqa: F401

    t2 = time.perf_counter()
    import jax
    import jax.numpy as jnp

    t3 = time.perf_counter()
    a = jax.random.normal(jax.random.PRNGKey(seed), (n, n)) + n * jnp.eye(n)
    g = jax.jit(jax.grad(lambda x: jnp.sum(jnp.linalg.solve(a, x) ** 2)))(jnp.ones(n))
    return {"norm": float(jnp.linalg.norm(g)), "import_jax_s": t3 - t0, "ml_dtypes_s": t2 - t1}


def warm() -> dict:
    """What a pre-warmed child runs before its first job (``child.prewarm``): import numpy and
    jax (XLA's client and its thread pools are left to the job, which makes them as it would)."""
    import jax.numpy  # noqa: F401

    return {}
