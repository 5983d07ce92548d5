"""A batch submission that fails ends `sweep submit` with the scheduler's message (found:
`sweep submit` printed a tornado traceback and waited forever without a reachable SLURM).

Fake ``sbatch`` / ``qsub`` on PATH that exit 1; the real local SLURM with a bad partition is
in tests/cluster/test_slurm.py.
"""

import os
import time

import pytest
import yaml

from sweep import open_results
from tests.helpers import JOBS, cli_submit

FAKES = {
    "slurm": ("sbatch", "sbatch: fatal: Could not establish a configuration source"),
    "pbs": ("qsub", "qsub: Bad UID for job execution MSG=ruserok failed validating guest/guest"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(FAKES))
def test_a_failed_batch_submission_ends_submit_with_the_schedulers_message(tmp_path, kind):
    command, message = FAKES[kind]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / command
    fake.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    fake.chmod(0o755)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:noop",
                "params": {"grid": {"x": [1, 2]}},
                "cluster": {
                    "kind": kind,
                    "cores": 1,
                    "memory": "1GiB",
                    "jobs": 2,
                    "interface": "lo",
                    "dashboard": "127.0.0.1:0",
                    "shared_temp_directory": str(tmp_path / "tls"),
                    "log_directory": str(tmp_path / "logs"),
                },
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    t0 = time.monotonic()
    proc = cli_submit(recipe, env=env, timeout=180)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert time.monotonic() - t0 < 90
    assert message in proc.stderr
    assert "could not submit" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    ds = open_results(tmp_path / "out.zarr")  # the store is there, resumable
    assert (ds["status"] == "pending").all() and ds.attrs["sweep_run_state"] == "failed"
