"""What XLA's client pool of two threads costs a one-core job (the host-callback fix).

Runs the same JAX job in capped children pinned to one core, alternating the old setting
(``NPROC = PJRT_NPROC = 1``) and the current one (2), ``--repeat`` times each, and prints the
medians of the time per step and the threads the child holds, and their ratio.

    .venv/bin/python benchmarks/client_threads.py [--repeat 5] [--steps 200] [--n 512]
"""

from __future__ import annotations

import argparse
from statistics import median
from typing import Any

from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.worker.child import Child

SETTINGS = {"old (1)": ChildConfig(env=(("NPROC", "1"), ("PJRT_NPROC", "1"))), "now (2)": ChildConfig()}


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
        print(f"{name:8s} {row['ms']:.2f} ms/step  {row['threads']:.0f} threads")
    old, now = rows["old (1)"], rows["now (2)"]
    print(f"ratio now/old: {now['ms'] / old['ms']:.2f} time, +{now['threads'] - old['threads']:.0f} threads")


if __name__ == "__main__":
    main()
