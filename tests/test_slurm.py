"""A real single-node SLURM (scripts/slurm-local.sh): sweeps through dask-jobqueue with TLS.

Started once per session when this runs as root with Debian's packages reachable (as CI
does); skipped with the reason otherwise.
"""

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sweep import Sweep
from tests.conftest import JOBS, ROOT

SCRIPT = ROOT / "scripts" / "slurm-local.sh"
CONF = Path(os.environ.get("SWEEP_SLURM_DIR", "/tmp/sweep-slurm")) / "slurm.conf"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="starting SLURM needs root"),
    pytest.mark.skipif(
        not shutil.which("slurmctld") and not shutil.which("apt-get"), reason="no SLURM and no apt-get"
    ),
]


@pytest.fixture(scope="module")
def slurm():
    up = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        pytest.fail(f"could not start SLURM:\n{up.stdout}\n{up.stderr}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(CONF)
    yield CONF
    subprocess.run(["scancel", "--user=root"], capture_output=True, check=False)
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old


def slurm_sweep(tmp_path, params, **cluster):
    settings = {
        "kind": "slurm",
        "cores": 2,
        "memory": "2GiB",
        "jobs": 1,
        "queue": "debug",
        "walltime": "00:20:00",
        "interface": "lo",
        "dashboard": "127.0.0.1:0",
        "shared_temp_directory": str(tmp_path / "tls"),
        "log_directory": str(tmp_path / "logs"),
        "local_directory": str(tmp_path / "work"),
        **cluster,
    }
    return Sweep(f"{JOBS}:marked", params, cluster=settings, output=tmp_path / "slurm.zarr")


def squeue() -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_slurm_sweep_runs_over_tls_and_records_batch_jobs(slurm, tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    addresses = []
    s = slurm_sweep(
        tmp_path, {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"folder": str(markers), "seconds": 0.2}}
    )
    ds = s.run(progress=False, on_start=lambda client: addresses.append(client.scheduler.address))
    assert (ds["status"] == "done").all(), ds["error"].values
    assert addresses[0].startswith("tls://127.0.0.1:")
    jobs = set(ds["batch_job"].values.tolist())
    assert len(jobs) == 1 and next(iter(jobs)).isdigit()
    assert set(ds["host"].values.tolist()) and (ds["cores"] != "").all()
    assert not squeue(), "the batch job should end with the sweep"


def test_scancel_of_the_worker_job_mid_sweep_is_survived(slurm, tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    s = slurm_sweep(
        tmp_path, {"grid": {"x": list(range(6))}, "fixed": {"folder": str(markers), "seconds": 2.0}}
    )
    result = {}
    t = threading.Thread(target=lambda: result.update(ds=s.run(progress=False)))
    t.start()
    deadline = time.monotonic() + 120
    while not list(markers.iterdir()):
        assert time.monotonic() < deadline, "no point started"
        time.sleep(0.2)
    (first,) = squeue()
    subprocess.run(["scancel", first], check=True)
    t.join(300)
    assert not t.is_alive()
    ds = result["ds"]
    assert (ds["status"] == "done").all(), ds["error"].values
    jobs = set(ds["batch_job"].values.tolist())
    assert jobs - {first}, f"no replacement job ran points: {jobs}"
