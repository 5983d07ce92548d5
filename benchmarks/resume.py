"""What resuming costs: checking that every done point's outputs are still in the store.

Writes a store of N done points (a scalar and a 3-vector output each) straight through
``Store.write``, then times ``sweep.store.lost_points`` (what ``submit`` and ``status`` run
before anything else) ``--repeat`` times and prints the median.

    .venv/bin/python benchmarks/resume.py [--points 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from statistics import median

import numpy as np

from sweep.model.recipe import Recipe
from sweep.store import Store, lost_points
from sweep.wire.protocol import Output, PointRecord

NOOP = Path(__file__).resolve().parents[1] / "recipes" / "jobs" / "fdfd.py"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="sweep-resume-")) / "store.zarr"
    space = {"zip": {"x": list(range(args.points))}}
    loaded = Recipe.from_dict({"job": f"{NOOP}:noop", "params": space, "output": str(out)})
    with Store.open(out, loaded) as store:
        for start in range(0, args.points, 10_000):
            store.write(
                [
                    PointRecord(
                        (i,),
                        status="done",
                        outputs={"y": Output(float(i), ()), "v": Output(np.ones(3), ("k",))},
                    )
                    for i in range(start, min(start + 10_000, args.points))
                ]
            )
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        lost = lost_points(out)
        times.append(time.perf_counter() - t0)
    assert not lost.any()
    print(f"lost_points over {args.points} done points: median {median(times):.2f} s of {args.repeat} runs")


if __name__ == "__main__":
    main()
