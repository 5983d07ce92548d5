"""A small JAX workload for measuring a child's threads (``sweep doctor``, benchmarks).

Module level is standard library only: a capped child imports this right after pinning.
"""

from __future__ import annotations


def jax_grad(n: int = 64, seed: int = 0) -> dict:
    """Compile and run a gradient through a linear solve; returns the gradient's norm."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(seed), (n, n)) + n * jnp.eye(n)
    g = jax.jit(jax.grad(lambda x: jnp.sum(jnp.linalg.solve(a, x) ** 2)))(jnp.ones(n))
    return {"norm": float(jnp.linalg.norm(g))}


def warm() -> dict:
    """What a pre-warmed child runs before its first job (``child.prewarm``): import numpy and
    jax (XLA's client and its thread pools are left to the job, which makes them as it would)."""
    import jax.numpy  # noqa: F401

    return {}
