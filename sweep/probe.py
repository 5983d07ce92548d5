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
    jax and make XLA's CPU client (its thread pools), so the first job starts on all of that."""
    import jax.numpy as jnp

    jnp.zeros(1).block_until_ready()
    return {}
