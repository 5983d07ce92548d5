"""Jobs the benchmarks run. Module level is standard library only (children import it)."""

from __future__ import annotations

import time
from functools import cache

TERMS = 20  # sizes the compile: ~5 s on the reference machine (benchmarks/README.md)
STEPS = 800  # sizes the run: ~2 s on one core


@cache
def _heavy(terms: int):
    import jax
    import jax.numpy as jnp

    def f(x, w):
        for i in range(terms):  # unrolled on purpose: a big graph is a long compile
            x = jnp.tanh(x @ w + 0.001 * i) * jnp.cos(x + i)
        return jnp.sum(x**2)

    return jax.jit(jax.value_and_grad(f))


def compile_heavy(seed: int = 0, terms: int = TERMS, steps: int = STEPS) -> dict:
    """Compile a large jitted gradient (the same graph for every seed), then step it."""
    import jax
    import jax.numpy as jnp

    t0 = time.perf_counter()
    f = _heavy(terms)
    x = jax.random.normal(jax.random.PRNGKey(seed), (32, 32))
    w = jnp.eye(32) * 0.5
    value, grad = f(x, w)
    jax.block_until_ready(grad)
    t1 = time.perf_counter()
    for _ in range(steps):
        value, grad = f(x, w)
        w = w - 1e-4 * jnp.mean(grad)
    jax.block_until_ready(value)
    return {"value": float(value), "first_call_s": t1 - t0, "steps_s": time.perf_counter() - t1}


def fixed_work(seed: int = 0, steps: int = 900) -> dict:
    """A fixed amount of single-core JAX compute with a small compile (the efficiency job)."""
    import jax
    import jax.numpy as jnp

    f = _small()
    x = jax.random.normal(jax.random.PRNGKey(seed), (512, 512))
    for _ in range(steps):
        x = f(x)
    return {"value": float(jax.block_until_ready(jnp.sum(x)))}


@cache
def _small():
    import jax
    import jax.numpy as jnp

    return jax.jit(lambda x: jnp.tanh(x @ x.T / 512.0) + 0.01)


def noop(**params) -> dict:
    return {"ok": 1.0}


def matmul_grad(steps: int = 200, n: int = 512) -> dict:
    """Time per step of a jitted gradient of three n x n matmuls (after one warm-up step)."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((n, n)) / n
    g = jax.jit(jax.grad(lambda a: jnp.sum(jnp.tanh(a @ a @ a))))
    jax.block_until_ready(g(x))
    t0 = time.perf_counter()
    for _ in range(steps):
        jax.block_until_ready(g(x))
    return {"ms_per_step": (time.perf_counter() - t0) / steps * 1e3}


def first_result(seed: int = 0, steps: int = 20) -> dict:
    """A small JAX job that says where its own time went: importing jax (nothing in a child
    that imported it already), compiling its jitted step, running it."""
    import sys

    t0 = time.perf_counter()
    warm = "jax" in sys.modules
    import jax
    import jax.numpy as jnp

    t1 = time.perf_counter()

    @jax.jit
    def step(x):
        return jnp.tanh(x @ x.T) * 0.5 + x * 0.5

    x = jax.random.normal(jax.random.PRNGKey(seed), (64, 64))
    x = step(x).block_until_ready()
    t2 = time.perf_counter()
    for _ in range(steps):
        x = step(x)
    x.block_until_ready()
    t3 = time.perf_counter()
    return {"import_s": t1 - t0, "compile_s": t2 - t1, "run_s": t3 - t2, "jax_was_imported": float(warm)}


def call_file(job_file: str, function: str, **kwargs) -> dict:
    """``function(**kwargs)`` from the file ``job_file`` (imported once per process): how the
    loky and Parsl baselines run a job that lives in a file, as sweep does."""
    import importlib.util
    import sys

    name = "bench_job_" + str(abs(hash(job_file)))
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, job_file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    result = getattr(module, function)(**kwargs)
    return {k: v for k, v in result.items() if isinstance(v, float | int)}


def python_loop(x: int = 0, n: int = 60_000_000) -> dict:
    """A pure-Python loop that touches little memory: what one core alone gives, with no cache
    or memory bandwidth to share with the jobs beside it."""
    total = 0
    for i in range(n):
        total += i
    return {"total": float(total)}


def sleeper(i: int = 0, seconds: float = 3.0) -> dict:
    """Sleeps: a job that holds a slot and no CPU (benchmarks/ramp.py)."""
    time.sleep(seconds)
    return {"slept": seconds}


def between(i: int = 0, low: float = 30.0, high: float = 60.0) -> dict:
    """Sleeps ``low`` to ``high`` seconds, spread evenly over ``i`` (golden-ratio steps); says
    when it started and ended by this machine's clock (benchmarks/slots.py)."""
    seconds = low + (high - low) * ((i * 0.6180339887498949) % 1.0)
    t0 = time.time()
    time.sleep(seconds)
    return {"slept": seconds, "t0": t0, "t1": time.time()}


def many_outputs(x: int, n: int = 100) -> dict:
    """``n`` scalar outputs (one per frequency or mode, say)."""
    return {f"out_{i:04d}": float(x * i) for i in range(n)}


def tpu_matmuls(x: int = 0, n: int = 2048, steps: int = 200) -> dict:
    """A jitted step of n x n matmuls on JAX's default device, ``steps`` times; which platform
    it ran on (1.0: a TPU) and the seconds per step after the compile."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(x), (n, n), dtype=jnp.bfloat16)
    step = jax.jit(lambda m: jnp.tanh(m @ m / n))
    jax.block_until_ready(step(a))
    t0 = time.perf_counter()
    for _ in range(steps):
        a = step(a)
    jax.block_until_ready(a)
    return {
        "s_per_step": (time.perf_counter() - t0) / steps,
        "tpu": float(jax.devices()[0].platform == "tpu"),
    }
