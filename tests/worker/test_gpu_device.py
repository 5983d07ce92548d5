"""GPU points on a real device: run where ``nvidia-smi`` lists one and JAX has CUDA; skipped
elsewhere (no device is lent to CI). Four points of ``gpus: 0.5`` on one device: two share it
at a time, none runs out of memory, and each records its device and peak device memory.

Run it alone on a machine with a device: ``.venv/bin/python -m pytest tests/worker/test_gpu_device.py``.
"""

import importlib.util
import os

import pytest

from sweep import Sweep
from sweep.worker import gpus
from tests.helpers import JOBS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not gpus.detect() or gpus.FAKE in os.environ, reason="needs a GPU"),
    pytest.mark.skipif(
        not any(importlib.util.find_spec(p) for p in gpus.CUDA_PLUGINS),
        reason='needs JAX with CUDA ("jax[cuda12]")',
    ),
]


def test_four_half_device_points_share_one_device_two_at_a_time(tmp_path):
    ds = Sweep(
        f"{JOBS}:jax_on_device",
        {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"n": 4096, "seconds": 3.0}},
        output=tmp_path / "gpu.zarr",
        resources={"gpus": 0.5},
        cluster={"dashboard": "127.0.0.1:0", "gpus": 1},
    ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert (ds["platform"] == 1).all()  # JAX ran on the GPU
    assert len(set(ds["gpus"].values.tolist())) == 1
    assert (ds["peak_gpu_memory"] > 0).all(), ds["peak_gpu_memory"].values
    spans = sorted(zip(ds["started"].values, ds["finished"].values))
    most = max(sum(1 for a, b in spans if a <= s < b) for s, _ in spans)
    assert most == 2, spans
    print(
        {
            "peak_gpu_memory_MiB": (ds["peak_gpu_memory"].values / 2**20).tolist(),
            "wall_s": ds["wall_s"].values.tolist(),
        }
    )
