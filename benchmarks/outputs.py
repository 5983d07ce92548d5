"""A job returning many scalar outputs: the seconds the store spends on a sweep's first write.

Each output is a variable of its own, created by the first point that returns it. For n = 10,
100, 1000, 3000 outputs, a 2-point sweep's store time (``Sweep.stats["store_s"]``: creating the
n variables, then both points' writes) beside the baseline, plain xarray writing the same n
variables of 2 points to a new zarr store in one ``to_zarr``. Medians of ``repeat`` runs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
COUNTS = (10, 100, 1000, 3000)


def _plain_xarray(n: int, folder: Path) -> float:
    import xarray as xr

    ds = xr.Dataset(
        {f"out_{i:04d}": ("x", np.array([1.0 * i, 2.0 * i])) for i in range(n)}, coords={"x": [1, 2]}
    )
    t0 = time.perf_counter()
    ds.to_zarr(folder / "plain.zarr", mode="w", consolidated=False)
    return time.perf_counter() - t0


def bench_outputs(repeat: int, client: object) -> dict:
    from sweep import Sweep

    rows = {}
    for n in COUNTS:
        store, plain = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                s = Sweep(
                    f"{HERE / 'jobs.py'}:many_outputs",
                    {"grid": {"x": [1, 2]}, "fixed": {"n": n}},
                    output=folder / "s.zarr",
                )
                s.run(client=client, progress=False)
                store.append(s.stats["store_s"])
                plain.append(_plain_xarray(n, folder))
        rows[str(n)] = {
            "store_s": statistics.median(store),
            "plain_xarray_s": statistics.median(plain),
            "ratio": statistics.median(store) / statistics.median(plain),
        }
    return rows
