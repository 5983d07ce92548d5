"""Which affinity a running child should have: pinned for its life, or widened once its
runtime has started.

    .venv/bin/python benchmarks/run.py --only affinity [--repeat 3]

One child per core, started as sweep starts them (capped environment, a shared compile cache),
each running the same job at once; per repeat and policy the pair's wall (the last child to end)
and each child's peak threads. Policies, interleaved within each repeat (the order rotates):

* **pinned** (sweep's today): each child on its own core for its life;
* **widened**: each child pinned while its runtime starts (numpy, jax, XLA's client and a
  first compile: every pool that sizes itself from the visible CPUs exists), then every one of
  its threads allowed onto all the children's cores (``sched_setaffinity`` of each thread, what
  "allowed onto the worker's leased cores" means for one pool), as loky's unpinned workers are
  but with their pools already sized to one core;
* **unpinned**: loky's way: no affinity, BLAS and OpenMP capped to 1 and XLA's client pool at 2
  (what invrs-opt's host callback needs), so XLA's codegen pools see every CPU.

Workloads: invrs-gym's lightweight waveguide bend (15 L-BFGS-B steps, warm children: its serial
SciPy phases are where a pinned child leaves its core's neighbour idle), the efficiency job (a
matmul-bound JAX loop, warm), and the compile-heavy job in fresh children (a cold compile, where
XLA's codegen could use the other core). Each child first runs the job once (warm workloads) so
that what is timed is the policy, not imports.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sweep.cluster.clusters import local_cores
from sweep.wire.childconfig import CAPPED_TO_ONE, ChildConfig
from sweep.wire.jobref import JobRef
from sweep.worker.child import Child

HERE = Path(__file__).resolve().parent
POLICIES = ("pinned", "widened", "unpinned")
INVRS = HERE.parent / "recipes" / "jobs" / "invrs.py"


def start_runtime() -> None:
    """What a child's runtime start means here: jax imported, XLA's client up, a first compile."""
    import jax
    import jax.numpy as jnp

    jax.jit(lambda x: x + 1)(jnp.ones(4)).block_until_ready()


def widen(cores: list[int]) -> None:
    """Allow every thread of this process onto ``cores`` (threads keep their own mask: each
    one is set, not just the process's main thread)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), set(cores))
        except OSError:  # a thread that ended meanwhile
            pass


def under_policy(policy: str, cores: list[int], file: str, function: str, **kwargs: Any) -> dict:
    """Start the runtime, apply ``policy`` (``widened``: onto ``cores``), run ``function`` of
    ``file``; its float outputs and this process's threads at the end."""
    import sys

    sys.path.insert(0, str(HERE))
    import jobs  # benchmarks/jobs.py

    start_runtime()
    if policy == "widened":
        widen(cores)
    out = jobs.call_file(file, function, **kwargs)
    return {**out, "threads_at_end": float(len(os.listdir("/proc/self/task")))}


def _config(policy: str, cache: str) -> ChildConfig:
    if policy == "unpinned":
        env = tuple({**dict.fromkeys(CAPPED_TO_ONE, "1"), "NPROC": "2", "PJRT_NPROC": "2"}.items())
        return ChildConfig(cap=False, compile_cache=cache, env=env)
    return ChildConfig(compile_cache=cache)


def _pair(children: list[Child], policy: str, file: str, function: str, kwargs: dict) -> tuple[float, int]:
    """(wall of the pair, the larger peak threads) of the children running the job at once."""
    ref = JobRef("file", __file__, "under_policy")
    cores = list(range(len(children)))
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(children)) as pool:
        records = list(
            pool.map(
                lambda c: c.run(ref, {"policy": policy, "cores": cores, "file": file, "function": function,
                                      **kwargs}),
                children,
            )
        )  # fmt: skip
    wall = time.perf_counter() - t0
    for r in records:
        assert r.status == "done", r.error[-2000:]
    return wall, max(r.peak_threads for r in records)


def _children(policy: str, cache: str) -> list[Child]:
    return [Child((c,), _config(policy, cache)) for c in range(local_cores())]


def measure(name: str, file: str, function: str, kwargs: dict, warm: dict | None, repeat: int) -> dict:
    """Walls and peak threads per policy for one workload, ``repeat`` rounds interleaved."""
    walls: dict[str, list[float]] = {p: [] for p in POLICIES}
    threads: dict[str, list[int]] = {p: [] for p in POLICIES}
    kept: dict[str, list[Child]] = {}
    try:
        if warm is not None:  # warm children, kept across rounds
            for p in POLICIES:
                kept[p] = _children(p, tempfile.mkdtemp(prefix=f"sweep-bench-aff-{p}-"))
                _pair(kept[p], p, file, function, warm)
        for i in range(repeat):
            for p in POLICIES[i % 3 :] + POLICIES[: i % 3]:
                kids = kept.get(p) or _children(p, tempfile.mkdtemp(prefix=f"sweep-bench-aff-{p}-"))
                try:
                    wall, peak = _pair(kids, p, file, function, {**kwargs, "seed": i})
                finally:
                    if p not in kept:
                        for c in kids:
                            c.kill()
                walls[p].append(wall)
                threads[p].append(peak)
    finally:
        for kids in kept.values():
            for c in kids:
                c.kill()
    out: dict[str, Any] = {"runs": walls, "peak_threads": threads}
    for p in POLICIES:
        out[f"{p}_s"] = statistics.median(walls[p])
        out[f"{p}_threads"] = max(threads[p])
    for p in POLICIES[1:]:
        out[f"{p}_over_pinned"] = out[f"{p}_s"] / out["pinned_s"]
    print(f"affinity {name}: {out}", flush=True)
    return out


def bench_affinity(repeat: int, quick: bool = False) -> dict:
    """Every workload's walls and threads under each policy (see the module docstring)."""
    jobs = str(HERE / "jobs.py")
    out = {}
    if importlib.util.find_spec("invrs_gym") is not None:
        steps = 5 if quick else 15
        out["invrs"] = measure("invrs", str(INVRS), "optimize", {"steps": steps}, {"steps": 2}, repeat)
    out["matmul"] = measure(
        "matmul", jobs, "fixed_work", {"steps": 300 if quick else 900}, {"steps": 1}, repeat
    )
    out["compile_heavy"] = measure("compile_heavy", jobs, "compile_heavy", {"steps": 100}, None, repeat)
    return out
