"""The ``sweep`` command as a process: what it does with its streams and signals."""

import subprocess
import sys

import yaml

from sweep import open_results
from tests.conftest import JOBS, ROOT


def test_submit_piped_into_head_finishes_the_sweep(tmp_path):
    """`sweep submit ... | head -n 1`: head exits after the first line; the sweep goes on."""
    recipe = tmp_path / "recipe.yaml"
    out = tmp_path / "out.zarr"
    recipe.write_text(
        yaml.safe_dump(
            {
                "name": "piped",
                "job": f"{JOBS}:square",
                "params": {"grid": {"x": [1.0, 2.0, 3.0, 4.0]}, "fixed": {"seconds": 0.5}},
                "resources": {"threads": 1},
                "cluster": {"kind": "local", "dashboard": "127.0.0.1:0"},
                "output": str(out),
            }
        )
    )
    cmd = f"{sys.executable} -m sweep.cli submit {recipe} 2>&1 | head -n 1; echo rc=${{PIPESTATUS[0]}}"
    run = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.stdout.strip().splitlines()[-1] == "rc=0", run.stdout + run.stderr
    ds = open_results(out)
    assert (ds["status"] == "done").all(), ds["status"].values
    assert ds.attrs["sweep_run_state"] == "finished"
