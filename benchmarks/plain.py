"""The honest limit of a node: N plain processes side by side, no orchestrator.

``cores`` plain ``python`` processes, each pinned to one core of its own (before anything
loads), with the capped environment (:meth:`sweep.wire.childconfig.ChildConfig.environ`: every
thread cap at 1, XLA computations inline) and warm (each runs the job once, untimed), are told
to start at once; each takes the next of ``jobs`` from a pipe they share until none is left
and reports each job's wall. The limit's wall is from the start signal to the last job's end.
Nothing dispatches, samples or records: what is left is what the machine itself costs (shared
caches and memory bandwidth), the wall an orchestrator is judged against (:mod:`benchmarks.node`).

    python -m benchmarks.plain --jobs 26 [--job matmul]

Also :func:`bandwidth`: one process copying 64 MB arrays alone and ``cores`` at once, the
machine's memory bandwidth shared (a JAX job's tail where it runs out).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from sweep.wire.childconfig import JAX_CONFIG_VAR, ChildConfig
from sweep.wire.jobref import JobRef

_GO = [0.0]  # when the last side-by-side run was told to go (time.perf_counter: system-wide)

# one plain process: pinned first, then the job loaded and run once (warm), then "ready"; on
# "go" it claims jobs one byte at a time from a pipe all of them share (a read of one byte is
# atomic: each job runs once, a process that finishes early takes the next, as a pool's does,
# and nothing else is shared), and prints each job's wall and when its last one ended
PLAIN = """
import os, sys, json, time, runpy
os.sched_setaffinity(0, {{{core}}})
config = dict(kv.split("=", 1) for kv in os.environ.get({config_var!r}, "").split(",") if kv)
fn = runpy.run_path({path!r})[{name!r}]
import jax
for key, value in config.items():
    jax.config.update(key, value.lower() == "true")
fn(**{kwargs!r})
print("ready", flush=True)
sys.stdin.readline()
walls = []
while os.read({queue}, 1):
    t0 = time.perf_counter()
    fn(**{kwargs!r})
    walls.append(time.perf_counter() - t0)
print(json.dumps([walls, time.perf_counter()]), flush=True)
"""

COPY = """
import os, sys, time
os.sched_setaffinity(0, {{{core}}})
import numpy as np
a = np.ones(8_000_000); b = np.empty_like(a)
np.copyto(b, a)
print("ready", flush=True)
sys.stdin.readline()
t0 = time.perf_counter()
for _ in range({copies}):
    np.copyto(b, a)
print(time.perf_counter() - t0, flush=True)
"""


def _side_by_side(
    codes: Sequence[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()
) -> tuple[float, list[str]]:
    """Start one process per code, wait until every one says ready, tell them all to go; the
    wall from go to the last one's exit, and each one's last line."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=pass_fds,
        )
        for code in codes
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"a plain process did not start: {line!r} (exit {proc.wait()})")
        t0 = _GO[0] = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        lines = [proc.communicate()[0].strip().splitlines()[-1] for proc in procs]
        wall = time.perf_counter() - t0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return wall, lines


def plain(work: tuple[JobRef, dict[str, Any]], jobs: int, cores: Sequence[int]) -> tuple[float, list[float]]:
    """Wall of ``jobs`` runs of ``work`` by ``len(cores)`` plain pinned processes side by side
    (from go to the last job's end: a process's exit is not the job's), and each job's wall."""
    job, kwargs = work
    env = ChildConfig(platforms="cpu").environ([cores[0]])  # one core each: the same for all
    queue, fill = os.pipe()
    os.write(fill, b"j" * jobs)  # one byte a job; jobs < the pipe's 64 KiB
    os.close(fill)
    codes = [
        PLAIN.format(
            core=core,
            config_var=JAX_CONFIG_VAR,
            path=job.target,
            name=job.function,
            kwargs=kwargs,
            queue=queue,
        )
        for core in cores
    ]
    try:
        _, lines = _side_by_side(codes, env, pass_fds=(queue,))
    finally:
        os.close(queue)
    reports = [json.loads(line) for line in lines]
    return max(end for _, end in reports) - _GO[0], [w for walls, _ in reports for w in walls]


def bandwidth(cores: Sequence[int], copies: int = 40) -> dict[str, float]:
    """Seconds for ``copies`` 64 MB copies by one pinned process alone, and the median and max
    of ``len(cores)`` such processes at once: how far the memory bus slows work when all
    cores run."""
    env = ChildConfig(platforms="cpu").environ([cores[0]])
    alone = float(_side_by_side([COPY.format(core=cores[0], copies=copies)], env)[1][0])
    together = [float(x) for x in _side_by_side([COPY.format(core=c, copies=copies) for c in cores], env)[1]]
    return {
        "copy_alone_s": alone,
        "copy_at_once_median_s": statistics.median(together),
        "copy_at_once_max_s": max(together),
        "copy_at_once_over_alone": statistics.median(together) / alone,
    }


def spread(walls: Sequence[float]) -> dict[str, float]:
    """The median, 90th percentile and max of per-job walls."""
    ordered = sorted(walls)
    return {
        "median_s": statistics.median(ordered),
        "p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max_s": ordered[-1],
    }


def main() -> None:
    import argparse

    from benchmarks.node import WORKLOADS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=26)
    parser.add_argument("--job", choices=list(WORKLOADS), default="matmul")
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    wall, walls = plain(WORKLOADS[args.job], args.jobs, cores)
    print(json.dumps({"wall_s": wall, "per_job": spread(walls), **bandwidth(cores)}, indent=1))


if __name__ == "__main__":
    main()
