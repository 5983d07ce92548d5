"""A real single-node Son of Grid Engine (scripts/sge-local.sh): sweeps through
``cluster.kind: sge`` as a user types them on the cluster's submit host.

Each test run starts its own Grid Engine, in namespaces of its own (its qmaster and execd
listen there only), and stops it at the end; every ``sweep`` command runs inside through
``sge-local.sh on``. Skipped with the reason where the machine can't (not root, no namespaces,
no Debian packages nor apt-get).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from sweep import open_results
from tests.helpers import JOBS, ROOT, sweep_command

SCRIPT = ROOT / "scripts" / "sge-local.sh"

pytestmark = [pytest.mark.slow, pytest.mark.sge]


@pytest.fixture(scope="module")
def sge(tmp_path_factory):
    """This test run's Grid Engine: its folder (SWEEP_SGE_DIR)."""
    subprocess.run([str(ROOT / "scripts" / "system-deps.sh")], capture_output=True, timeout=900)
    folder = tmp_path_factory.mktemp("sge")
    env = {**os.environ, "SWEEP_SGE_DIR": str(folder)}
    up = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, env=env, timeout=300)
    if up.returncode != 0:
        subprocess.run([str(SCRIPT), "stop"], env=env, timeout=120)
        pytest.fail(f"could not start Grid Engine:\n{up.stdout}\n{up.stderr}")
    yield env
    subprocess.run([str(SCRIPT), "stop"], env=env, timeout=120)


def inside(env: dict, *cmd: str, **kw) -> list[str] | subprocess.CompletedProcess:
    """``cmd`` run on the Grid Engine's host (``sge-local.sh on``), output captured."""
    return subprocess.run(
        [str(SCRIPT), "on", *cmd], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT, **kw
    )


def sweep_inside(env: dict, *args: str) -> subprocess.CompletedProcess:
    return inside(env, *sweep_command(*args))


def jobs(env: dict) -> list[str]:
    """The ids of the Grid Engine's jobs, pending or running (qstat's lines after its header)."""
    out = inside(env, "qstat", "-u", "*").stdout.splitlines()
    return [line.split()[0] for line in out[2:] if line.strip()]


def jobs_after(env: dict, seconds: float) -> list[str]:
    """The queue once it is empty, or after ``seconds`` (qdel is asynchronous)."""
    deadline = time.monotonic() + seconds
    while (left := jobs(env)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def accounted(env: dict, job: str, seconds: float = 60) -> str:
    """``qacct -j JOB`` once the ended job's record is written (it is flushed each second)."""
    deadline = time.monotonic() + seconds
    while not re.search(r"^jobnumber\s+\d+", (out := inside(env, "qacct", "-j", job)).stdout, re.M):
        assert time.monotonic() < deadline, f"no accounting record of job {job}: {out.stdout}{out.stderr}"
        time.sleep(0.5)
    return out.stdout


def recipe(tmp_path: Path, job: str, params: dict, kind: str = "sge", **cluster) -> Path:
    settings = (
        {
            "kind": "sge",
            "cores": 2,
            "memory": "2GiB",
            "jobs": 1,
            "queue": "sweep.q",
            "walltime": "00:20:00",
            "interface": "lo",
            "dashboard": "127.0.0.1:0",
            "shared_temp_directory": str(tmp_path / "tls"),
            **cluster,
        }
        if kind == "sge"
        else {"dashboard": "127.0.0.1:0"}
    )
    path = tmp_path / f"{kind}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": f"on-{kind}",
                "job": f"{JOBS}:{job}",
                "params": params,
                "cluster": settings,
                "output": str(tmp_path / f"{kind}.zarr"),
            }
        )
    )
    return path


def test_an_sge_sweep_ends_done_with_its_jobs_logs_under_the_store_and_a_local_runs_values(sge, tmp_path):
    params = {"grid": {"x": [0.5, 1.0, 2.0, 3.0]}, "fixed": {"offset": 1.0, "seconds": 0.3}}
    done = sweep_inside(sge, "submit", str(recipe(tmp_path, "square", params, jobs=2)), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    ds = open_results(tmp_path / "sge.zarr")
    assert (ds["status"] == "done").all(), ds["error"].values
    ids = set(ds["batch_job"].values.tolist())
    assert ids and all(j.isdigit() for j in ids), ids
    assert set(ds["host"].values.tolist()) == {"sgehost"}
    # the batch jobs are named for the sweep, their logs under the store, one per job
    logs = {p.name for p in (tmp_path / "sge.zarr" / "logs" / "batch").iterdir()}
    assert {f"sweep-on-sge.o{j}" for j in ids} <= logs, logs
    assert not jobs_after(sge, 30), "the batch jobs should end with the sweep"
    for job in ids:  # each job held its 2 cores as 2 slots of the parallel environment smp
        account = accounted(sge, job)
        assert re.search(r"^granted_pe\s+smp\s*$", account, re.M), account
        assert re.search(r"^slots\s+2\s*$", account, re.M), account
    local = subprocess.run(
        sweep_command("submit", str(recipe(tmp_path, "square", params, kind="local")), "--no-progress"),
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    here = open_results(tmp_path / "local.zarr")
    for name in ("y", "vec", "curve"):
        assert (ds[name].values == here[name].values).all(), name


def test_sweep_cancel_ends_its_grid_engine_jobs(sge, tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    params = {"grid": {"x": list(range(6))}, "fixed": {"folder": str(markers), "seconds": 60.0}}
    path = recipe(tmp_path, "marked", params)
    started = sweep_inside(sge, "submit", str(path), "--detach")
    assert started.returncode == 0, started.stdout + started.stderr
    deadline = time.monotonic() + 180
    while not list(markers.iterdir()):
        assert time.monotonic() < deadline, f"no point started; queue: {jobs(sge)}"
        time.sleep(0.5)
    assert jobs(sge)
    cancelled = sweep_inside(sge, "cancel", str(tmp_path / "sge.zarr"))
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert not jobs_after(sge, 60), "cancel should release the batch jobs"
    ds = open_results(tmp_path / "sge.zarr")
    assert not (ds["status"] == "done").any()


def test_a_walltime_end_h_rt_retires_a_worker_and_a_new_job_runs_the_rest(sge, tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    params = {"grid": {"x": [0, 1]}, "fixed": {"folder": str(markers), "seconds": 25.0}}
    path = recipe(
        tmp_path, "marked", params, cores=1, walltime="00:01:00", log_directory=str(tmp_path / "logs")
    )
    yaml_recipe = yaml.safe_load(path.read_text())
    yaml_recipe["resources"] = {"expected": "25s"}
    path.write_text(yaml.safe_dump(yaml_recipe))
    done = sweep_inside(sge, "submit", str(path), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    ds = open_results(tmp_path / "sge.zarr")
    assert (ds["status"] == "done").all(), ds["error"].values
    assert (ds["attempts"] == 1).all() and (ds["requeued"] == 0).all()  # nothing killed by h_rt
    ids = ds["batch_job"].values.tolist()
    assert len(set(ids)) == 2, f"the second point should have run in a new batch job: {ids}"
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").glob("*"))
    assert "retires: its batch job ends before a point of 25 s could" in logs
