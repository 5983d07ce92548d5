"""A real single-node SLURM (scripts/slurm-local.sh): sweeps through dask-jobqueue with TLS.

Started once per session when this runs as root with Debian's packages reachable (as CI
does); skipped with the reason otherwise.
"""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from sweep import Sweep, open_results
from tests.helpers import JOBS, ROOT, alive, cli, sweep_command

SCRIPT = ROOT / "scripts" / "slurm-local.sh"
# this test run's batch jobs carry this name: what the tests count and cancel is theirs alone
JOB_NAME = f"sweep-test-{os.getpid()}"
CONF = Path(os.environ.get("SWEEP_SLURM_DIR", "/tmp/sweep-slurm")) / "slurm.conf"

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def _running(name: str) -> bool:
    """Whether a live process is called ``name`` (a killed daemon's zombie is not one)."""
    return any(p.info["name"] == name and alive(p.pid) for p in psutil.process_iter(["name"]))


@pytest.fixture(scope="module")
def slurm():
    """SLURM for this module. Several test runs on one machine share the one single-node
    SLURM: each registers under ``users/`` while it uses it, and the last one out stops it when
    a test run started it (never one a person started with `make slurm`)."""
    users = CONF.parent / "users"
    users.mkdir(parents=True, exist_ok=True)
    me = users / str(os.getpid())
    me.touch()
    started_by_tests = CONF.parent / "started-by-tests"
    if not _running("slurmctld"):
        started_by_tests.touch()
    up = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        me.unlink(missing_ok=True)
        pytest.fail(f"could not start SLURM:\n{up.stdout}\n{up.stderr}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(CONF)
    yield CONF
    subprocess.run(["scancel", f"--name={JOB_NAME}"], capture_output=True, check=False)
    me.unlink(missing_ok=True)
    others = [p for p in users.iterdir() if p.name.isdigit() and alive(int(p.name))]
    if not others and started_by_tests.exists():
        started_by_tests.unlink(missing_ok=True)
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, check=False, timeout=60)
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old


def slurm_sweep(tmp_path, params, job="marked", resources=None, **cluster):
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
        "job_name": JOB_NAME,
        **cluster,
    }
    ref = job if ":" in job else f"{JOBS}:{job}"  # a function of tests/jobs.py, or a job reference
    return Sweep(ref, params, cluster=settings, output=tmp_path / "slurm.zarr", resources=resources or {})


def squeue() -> list[str]:
    """The ids of this test run's batch jobs (others' jobs on the same SLURM are not ours)."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i", f"--name={JOB_NAME}"], capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def squeue_after(seconds: float) -> list[str]:
    """The queue once it is empty, or after ``seconds`` (scancel is asynchronous)."""
    deadline = time.monotonic() + seconds
    while (jobs := squeue()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return jobs


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
    assert not squeue_after(15), "the batch job should end with the sweep"


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


def cli_recipe(tmp_path, markers: Path, points: int, seconds: float) -> Path:
    """A recipe run through `sweep submit` with the overrides a new user would type."""
    import yaml

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "name": "twojobs",
                "job": f"{JOBS}:rendezvous",
                "params": {
                    "grid": {"x": list(range(points))},
                    "fixed": {"folder": str(markers), "seconds": seconds},
                },
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    return recipe


TWO_JOBS = [
    "--set", "cluster.kind=slurm", "--set", "cluster.cores=1", "--set", "cluster.memory=1GiB",
    "--set", "cluster.jobs=2", "--set", "cluster.interface=lo", "--set", "cluster.dashboard=127.0.0.1:0",
]  # fmt: skip


def submit(recipe: Path, tmp_path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        sweep_command("submit", str(recipe), "--no-progress", *TWO_JOBS,
         "--set", f"cluster.shared_temp_directory={tmp_path / 'tls'}",
         "--set", f"cluster.job_name={JOB_NAME}", *extra),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_cli_sweep_on_two_batch_jobs_survives_closed_worker_connections(slurm, tmp_path):
    """Found: `sweep submit` died by SIGPIPE (rc 141, nothing stored) when a worker's TLS
    connection closed under the scheduler it hosts."""
    markers = tmp_path / "m"
    markers.mkdir()
    proc = submit(cli_recipe(tmp_path, markers, points=4, seconds=0.5), tmp_path)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    ds = open_results(tmp_path / "out.zarr")
    assert (ds["status"] == "done").all(), ds["error"].values
    jobs = set(ds["batch_job"].values.tolist())
    assert len(jobs) == 2 and all(j.isdigit() for j in jobs), jobs
    # the batch jobs' own logs are under the store, one per job, named for the job
    logs = {p.name for p in (tmp_path / "out.zarr" / "logs" / "batch").iterdir()}
    assert {f"{JOB_NAME}-{j}.out" for j in jobs} <= logs, logs
    assert not squeue(), "the batch jobs should end with the sweep"


def test_cli_sweep_survives_a_worker_killed_mid_sweep(slurm, tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    proc = submit(cli_recipe(tmp_path, markers, points=6, seconds=3.0), tmp_path)
    deadline = time.monotonic() + 120
    while len(list(markers.iterdir())) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the two points never ran together"
        time.sleep(0.1)
    worker_pid = int(sorted(markers.iterdir())[0].name.split("-")[3])
    os.kill(worker_pid, signal.SIGKILL)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    ds = open_results(tmp_path / "out.zarr")
    assert (ds["status"] == "done").all(), ds["error"].values


def test_killed_driver_ends_its_batch_jobs_and_a_rerun_resumes(slurm, tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    recipe = cli_recipe(tmp_path, markers, points=8, seconds=2.0)
    proc = submit(recipe, tmp_path, "--set", f"cluster.death_timeout={DEATH_TIMEOUT_S}")
    out = tmp_path / "out.zarr"
    deadline = time.monotonic() + 180
    while len(list(markers.iterdir())) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no point started"
        time.sleep(0.2)
    proc.kill()
    proc.communicate()
    killed_at = time.monotonic()
    while squeue():
        assert time.monotonic() - killed_at < DEATH_TIMEOUT_S + 30, f"batch jobs still there: {squeue()}"
        time.sleep(1)
    status = cli("status", str(out))
    assert status.returncode == 1
    assert "ended abnormally" in status.stdout, status.stdout
    rerun = submit(recipe, tmp_path)
    output, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, output
    assert (open_results(out)["status"] == "done").all()


DEATH_TIMEOUT_S = 15


def test_a_bad_partition_ends_submit_with_slurms_message(slurm, tmp_path):
    """Found: a batch submission that failed left `sweep submit` waiting forever."""
    markers = tmp_path / "m"
    markers.mkdir()
    t0 = time.monotonic()
    proc = submit(
        cli_recipe(tmp_path, markers, points=2, seconds=0.1), tmp_path, "--set", "cluster.queue=nosuch"
    )
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, output[-3000:]
    assert time.monotonic() - t0 < 90
    assert "could not submit a slurm batch job" in output and "invalid partition" in output.lower(), output
    assert "Traceback" not in output
    assert (open_results(tmp_path / "out.zarr")["status"] == "pending").all()


def test_a_detached_sweep_on_slurm_runs_to_the_end_and_names_its_batch_jobs(slurm, tmp_path):
    import json

    markers = tmp_path / "m"
    markers.mkdir()
    recipe = cli_recipe(tmp_path, markers, points=4, seconds=0.5)
    proc = submit(recipe, tmp_path, "--detach")
    printed, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, printed
    out = tmp_path / "out.zarr"
    state = json.loads((out / ".sweep-driver.json").read_text())
    assert f"pid {state['pid']}" in printed and state["scheduler"].startswith("tls://127.0.0.1:")
    attached = cli("attach", str(out))
    assert attached.returncode == 0, attached.stderr
    ds = open_results(out)
    assert (ds["status"] == "done").all() and ds.attrs["sweep_run_state"] == "finished"
    assert set(ds["batch_job"].values.tolist()) and not squeue_after(15)


def test_logs_of_a_point_on_a_slurm_worker_followed_and_kept(slurm, tmp_path):
    """What a job on a batch worker prints comes back through Dask (TLS): `logs --follow`
    streams it while it runs, and `logs` shows it from the store afterwards."""
    import json

    import yaml

    recipe = tmp_path / "tick.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:ticker",
                "params": {"grid": {"x": [0, 1]}, "fixed": {"n": 30, "every": 0.2}},
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    proc = submit(recipe, tmp_path, "--detach")
    printed, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, printed
    out = tmp_path / "out.zarr"
    pid = str(open_results(out)["point_id"].sel(x=1).item())
    logs = sweep_command("logs", str(out), "--point", pid)
    time.sleep(3)  # the driver tells its batch jobs every 2 s
    state = json.loads((out / ".sweep-driver.json").read_text())
    assert (
        state["credentials"]
        and len(state["batch_jobs"]) == 2
        and all(j.isdigit() for j in state["batch_jobs"])
    )
    followed = subprocess.run([*logs, "--follow"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert followed.returncode == 0, followed.stderr
    assert [line.split()[2] for line in followed.stdout.splitlines() if "tick" in line] == [
        str(i) for i in range(30)
    ]
    attached = subprocess.run(sweep_command("attach", str(out)), cwd=ROOT, capture_output=True, timeout=300)
    assert attached.returncode in (0, 2)  # 2: it had ended already
    ds = open_results(out)
    assert (ds["status"] == "done").all() and ds["batch_job"].sel(x=1).item().isdigit()
    kept = subprocess.run(logs, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert kept.stdout.count("tick") == 30 and f"==> point {pid} attempt 1 <==" in kept.stdout
    assert not squeue_after(15) and not Path(state["credentials"]).exists()


def test_a_point_that_cant_finish_before_the_walltime_waits_for_a_new_batch_job(slurm, tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    s = slurm_sweep(
        tmp_path,
        {"grid": {"x": [0, 1]}, "fixed": {"folder": str(markers), "seconds": 25.0}},
        resources={"expected": "25s"},
        cores=1,
        walltime="00:01:00",
    )
    ds = s.run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert (ds["attempts"] == 1).all() and (ds["requeued"] == 0).all()  # nothing killed by the walltime
    jobs = ds["batch_job"].values.tolist()
    assert len(set(jobs)) == 2, f"the second point should have run in a new batch job: {jobs}"
    first, second = sorted(range(2), key=lambda i: ds["started"].values[i])
    assert ds["started"].values[second] >= ds["finished"].values[first]
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").glob("*"))
    assert "retires: its batch job ends before a point of 25 s could" in logs


def test_a_preempted_batch_job_requeues_its_point_without_spending_a_retry(slurm, tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    params = {"grid": {"x": [3]}, "fixed": {"folder": str(markers), "seconds": 1.0, "steps": 12}}
    s = slurm_sweep(tmp_path, params, job="stepper", cores=1)
    result = {}
    t = threading.Thread(target=lambda: result.update(ds=s.run(progress=False)))
    t.start()
    deadline = time.monotonic() + 120
    while not (markers / "step-3").exists() or (markers / "step-3").read_text() not in ("4", "5", "6"):
        assert time.monotonic() < deadline, "the point never reached step 4"
        time.sleep(0.2)
    (first,) = squeue()
    subprocess.run(["scancel", "--signal=TERM", "--full", first], check=True)  # as preemption does
    t.join(300)
    assert not t.is_alive()
    ds = result["ds"]
    assert ds["status"].item() == "done", ds["error"].values
    assert ds["attempts"].item() == 1 and ds["requeued"].item() == 1
    assert ds["resumed_from"].item() >= 4 and ds["start"].item() == ds["resumed_from"].item()
    assert ds["batch_job"].item() != first
    value = 3.0
    for i in range(12):
        value = value * 0.5 + i
    assert ds["value"].item() == value


def test_a_batch_job_of_1gib_holds_one_600mib_point_at_a_time(slurm, tmp_path):
    s = slurm_sweep(
        tmp_path,
        {"grid": {"x": [0, 1, 2]}, "fixed": {"mb": 200, "hold": 1.5}},
        job="allocate",
        resources={"memory": "600MiB"},
        memory="1GiB",
    )
    ds = s.run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    spans = sorted(zip(ds["started"].values, ds["finished"].values))
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:])), spans
    assert len(set(ds["batch_job"].values.tolist())) == 1  # one job of 2 cores, one point at a time


@pytest.mark.mpirun
def test_a_batch_job_of_2_cores_runs_a_2_rank_point_on_its_own_cores(slurm, tmp_path):
    s = slurm_sweep(tmp_path, {"grid": {"x": [1, 2]}}, job="mpi_ranks", resources={"ranks": 2})
    ds = s.run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert ds["total"].values.tolist() == [3.0, 6.0]
    for i in range(2):  # each rank on its own leased core, the launcher kept off srun
        assert sorted(ds["rank_cores"].values[i].ravel().tolist()) == [0.0, 1.0]
    assert len(set(ds["batch_job"].values.tolist())) == 1


def _held_by_slurm(job: str, seconds: float = 60) -> float:
    """Core-seconds batch job ``job`` held as the controller records it once it ended: its
    CPUs times its end less its start (what sacct reports, from the same record)."""
    from datetime import datetime

    deadline = time.monotonic() + seconds
    while True:
        out = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True).stdout
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        if fields.get("JobState") not in (None, "RUNNING", "PENDING", "COMPLETING"):
            break
        assert time.monotonic() < deadline, f"batch job {job} did not end: {out}"
        time.sleep(0.5)
    start, end = (datetime.fromisoformat(fields[k]).timestamp() for k in ("StartTime", "EndTime"))
    return int(fields["NumCPUs"]) * (end - start)


def test_the_core_hours_a_run_says_it_held_agree_with_slurms_record(slurm, tmp_path):
    from sweep.client.listeners.allocation import runs_of

    markers = tmp_path / "m"
    markers.mkdir()
    s = slurm_sweep(
        tmp_path, {"grid": {"x": list(range(10))}, "fixed": {"folder": str(markers), "seconds": 10.0}}
    )
    ds = s.run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    (job,) = set(ds["batch_job"].values.tolist())
    held = _held_by_slurm(job)
    cost = runs_of(ds.attrs)[-1]
    assert abs(cost["held_core_s"] - held) <= 0.05 * held, (cost, held)
    assert cost["used_core_s"] >= 100.0 and cost["lost_core_s"] == 0.0  # 10 points of 10 s on one core
