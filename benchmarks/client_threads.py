"""What each way of running XLA on one core costs a one-core job.

Runs the same JAX job in capped children pinned to one core, alternating three settings,
``--repeat`` times each, and prints the medians of the time per step and the threads the
child holds:

* ``two threads``: ``NPROC = PJRT_NPROC = 2``, asynchronous dispatch (the setting before
  one-core children ran computations inline);
* ``one, async``: ``NPROC = PJRT_NPROC = 1``, asynchronous dispatch (host callbacks can
  deadlock: docs/threads.md);
* ``now``: the child's setting, ``NPROC = PJRT_NPROC = 1`` with computations run inline.

    .venv/bin/python benchmarks/client_threads.py [--repeat 5] [--steps 200] [--n 512]
"""

from __future__ import annotations

import argparse
import json
from statistics import median
from typing import Any

from sweep.wire.childconfig import JAX_CONFIG_VAR, ChildConfig
from sweep.wire.jobref import JobRef
from sweep.worker.child import Child


def xla_threads(n: int) -> ChildConfig:
    """The capped child with XLA's pools at ``n`` threads and JAX's asynchronous dispatch."""
    return ChildConfig(env=(("NPROC", str(n)), ("PJRT_NPROC", str(n)), (JAX_CONFIG_VAR, "")))


SETTINGS = {"two threads": xla_threads(2), "one, async": xla_threads(1), "now": ChildConfig()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--n", type=int, default=512)
    args = p.parse_args()
    job = JobRef("module", "benchmarks.jobs", "matmul_grad")
    seen: dict[str, dict[str, list[float]]] = {k: {"ms": [], "threads": []} for k in SETTINGS}
    for _ in range(args.repeat):
        for name, config in SETTINGS.items():
            child = Child([0], config)
            try:
                r = child.run(job, {"steps": args.steps, "n": args.n})
            finally:
                child.kill()
            assert r.status == "done", r.error
            seen[name]["ms"].append(float(r.outputs["ms_per_step"].values))
            seen[name]["threads"].append(r.peak_threads)
    rows: dict[str, Any] = {k: {m: median(v) for m, v in d.items()} for k, d in seen.items()}
    for name, row in rows.items():
        print(f"{name:12s} {row['ms']:.2f} ms/step  {row['threads']:.0f} threads")
    ratio = rows["now"]["ms"] / rows["two threads"]["ms"]
    print(json.dumps({"medians": rows, "now_over_two_threads": round(ratio, 3), "repeat": args.repeat}))


if __name__ == "__main__":
    main()
