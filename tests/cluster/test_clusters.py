"""Clusters: golden batch scripts for every dask-jobqueue backend, validation, dry runs."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.cli.app import main
from sweep.cluster.clusters import batch_cluster
from sweep.errors import SweepWarning
from sweep.model import backends
from sweep.model.recipe import ClusterSettings, Recipe, RecipeError
from tests.helpers import ROOT, kill_the_worker_mid_sweep, scheduler_and_workers, sweep_command

GOLDEN = ROOT / "tests" / "golden"
COMMON = {"cores": 4, "memory": "8GiB", "interface": "lo"}
HOUR = {"walltime": "01:00:00"}
PER_KIND = {
    "slurm": {**HOUR, "queue": "debug", "account": "proj42", "job_extra_directives": ["--exclusive"]},
    "pbs": {**HOUR, "queue": "workq", "account": "proj42", "resource_spec": "select=1:ncpus=4:mem=8GB"},
    "sge": {**HOUR, "queue": "all.q", "resource_spec": "h_vmem=8G"},
    "lsf": {**HOUR, "queue": "normal", "project": "proj42", "use_stdin": True},
    "htcondor": {"disk": "1GiB"},
    "oar": {**HOUR, "queue": "default", "project": "proj42"},
}


def normalise(script: str) -> str:
    script = script.replace(sys.executable, "PYTHON")
    script = re.sub(r"tls://127\.0\.0\.1:\d+", "tls://SCHEDULER", script)
    script = re.sub(r"\S*\.dask-jobqueue\.worker\.(\w+?)\.\w+", r"TLS_DIR/\1", script)
    return script


@pytest.mark.parametrize("kind", sorted(backends.CLASSES))
def test_job_script_matches_golden(kind, tmp_path):
    settings = ClusterSettings(kind=kind, shared_temp_directory=str(tmp_path), **COMMON, **PER_KIND[kind])
    with batch_cluster(settings) as cluster:
        script = normalise(cluster.job_script())
    golden = GOLDEN / f"{kind}.sh"
    if os.environ.get("SWEEP_UPDATE_GOLDEN"):
        golden.write_text(script)
    assert script == golden.read_text()
    # what every backend must carry, whatever its header looks like
    for fragment in (
        "--resources threads=4",
        "--nthreads 4",
        "--protocol tls://",
        "--dashboard-address 127.0.0.1:0",
    ):
        assert fragment in script


def test_unknown_jobqueue_option_is_named_with_a_suggestion():
    data = {"job": "tests/jobs.py:noop", "params": {"grid": {"x": [1]}}}
    with pytest.raises(
        RecipeError, match=r"cluster: unknown key 'walltim' for kind 'slurm'; did you mean 'walltime'"
    ):
        Recipe.from_dict(
            {**data, "cluster": {"kind": "slurm", "cores": 2, "memory": "1GiB", "walltim": "1:00"}}
        )
    with pytest.raises(RecipeError, match=r"unknown key\(s\) \['queue'\] for kind 'local'"):
        Recipe.from_dict({**data, "cluster": {"queue": "debug"}})
    with pytest.raises(RecipeError, match="needs cluster.cores and cluster.memory"):
        Recipe.from_dict({**data, "cluster": {"kind": "pbs"}})


def test_processes_and_security_are_not_the_recipes_to_set():
    data = {"job": "tests/jobs.py:noop", "params": {"grid": {"x": [1]}}}
    for key in ("processes", "protocol", "nanny"):
        with pytest.raises(RecipeError, match=f"unknown key '{key}'"):
            Recipe.from_dict({**data, "cluster": {"kind": "slurm", "cores": 2, "memory": "1GiB", key: 2}})


def test_security_false_warns():
    settings = ClusterSettings(kind="slurm", cores=2, memory="1GiB", security=False, interface="lo")
    with pytest.warns(SweepWarning, match="unauthenticated"), batch_cluster(settings) as cluster:
        assert "--protocol tls://" not in cluster.job_script()


def test_dry_run_prints_plan_and_script_and_submits_nothing(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "name: demo\n"
        f"job: {ROOT / 'tests' / 'jobs.py'}:noop\n"
        "params: {grid: {x: [1, 2, 3]}}\n"
        "resources: {threads: 2}\n"
        "cluster: {kind: slurm, cores: 4, memory: 8GiB, jobs: 3, interface: lo, "
        f"shared_temp_directory: {tmp_path}}}\n"
        f"output: {tmp_path / 'out.zarr'}\n"
    )
    assert main(["submit", str(recipe), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "slurm: 3 batch jobs, each 1 worker with 4 cores" in out and "2 points of 2 cores" in out
    assert "#SBATCH --cpus-per-task=4" in out
    # named for the sweep, logging into the store, appending on requeue
    assert "#SBATCH -J sweep-demo" in out and "#SBATCH --open-mode=append" in out
    assert f"#SBATCH -o {tmp_path / 'out.zarr' / 'logs' / 'batch'}/sweep-demo-%J.out" in out
    assert not (tmp_path / "out.zarr").exists()
    capsys.readouterr()
    assert main(["submit", str(recipe), "--dry-run", "--set", "resources.threads=8"]) == 2
    assert "a slurm job (cluster.cores) has 4 cores" in capsys.readouterr().err


@pytest.fixture
def running_scheduler(tmp_path):
    """`dask scheduler` + `dask worker --nthreads 2 --resources threads=2`, on 127.0.0.1."""
    with scheduler_and_workers(tmp_path, ["--nthreads", "2", "--resources", "threads=2"]) as address:
        yield address


@pytest.mark.slow
def test_address_kind_runs_on_a_running_scheduler(running_scheduler, tmp_path):
    from sweep import Sweep

    s = Sweep(
        f"{ROOT / 'tests' / 'jobs.py'}:affinity",
        {"grid": {"x": [0, 1, 2]}},
        cluster={"kind": "address", "address": running_scheduler},
        output=tmp_path / "a.zarr",
    )
    ds = s.run(progress=False)
    assert (ds["status"] == "done").all() and (ds["ncpus"] == 1).all()
    too_big = Sweep(
        f"{ROOT / 'tests' / 'jobs.py'}:affinity",
        {"grid": {"x": [0]}},
        resources={"threads": 4},
        cluster={"kind": "address", "address": running_scheduler},
        output=tmp_path / "b.zarr",
    )
    from sweep.cluster.clusters import ClusterError

    with pytest.raises(ClusterError, match="offers threads=4"):
        too_big.run(progress=False)


def test_batch_job_ids_of_every_scheduler(tmp_path):
    from sweep.worker.batchjob import batch_job_id

    assert batch_job_id({"SLURM_JOB_ID": "42"}) == "42"
    assert batch_job_id({"PBS_JOBID": "7.pbs01"}) == "7.pbs01"
    assert batch_job_id({}) == ""
    ad = tmp_path / ".job.ad"  # what HTCondor writes for a job submitted by dask-jobqueue
    ad.write_text('ClusterId = 1234\nProcId = 0\nJobId = "1234.0"\nDaskWorkerCores = 4\nOwner = "me"\n')
    assert batch_job_id({"_CONDOR_JOB_AD": str(ad)}) == "1234.0"
    ad.write_text("ClusterId = 99\nProcId = 3\n")
    assert batch_job_id({"_CONDOR_JOB_AD": str(ad)}) == "99.3"
    # the submit description gives every job the JobId the worker reads back
    assert 'MY.JobId = "$(ClusterId).$(ProcId)"' in (GOLDEN / "htcondor.sh").read_text()


def test_the_printed_dashboard_link_is_where_the_dashboard_listens(tmp_path):
    """Found: for batch kinds the link named the scheduler's host address while the dashboard
    listened on 127.0.0.1 only. The scheduler listens on 127.0.0.2 here (another loopback
    address, standing in for a login node's external one)."""
    import urllib.request

    from distributed import Client

    from sweep.cluster.clusters import dashboard_hint

    settings = ClusterSettings(
        kind="slurm",
        cores=1,
        memory="1GiB",
        dashboard="127.0.0.1:0",
        scheduler_options={"host": "127.0.0.2"},
        shared_temp_directory=str(tmp_path / "tls"),
        log_directory=str(tmp_path / "logs"),
    )
    with batch_cluster(settings) as cluster, Client(cluster, security=cluster.security) as client:
        assert cluster.scheduler.address.startswith("tls://127.0.0.2:")
        printed = dashboard_hint(client, settings)
        link, _, tunnel = printed.partition("  ")
        link, points = link.split(" (points: ")
        assert link.startswith("http://127.0.0.1:"), printed
        assert points == link.replace("/status", "/sweep") + ")", printed
        port = link.split(":")[2].split("/")[0]
        assert f"ssh -N -L {port}:127.0.0.1:{port}" in tunnel
        with urllib.request.urlopen(link, timeout=10) as page:
            assert page.status == 200


PLAIN_SCRIPT = """
import sweep

def double(x):
    return {"y": x * 2.0}

ds = sweep.Sweep(double, {"grid": {"x": [1, 2, 3]}}, output=OUTPUT, cluster={"dashboard": "127.0.0.1:0"}).run(
    progress=False
)
print("values", [float(v) for v in ds["y"].values])
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["file", "stdin"])
def test_a_plain_script_without_a_main_guard_runs_on_the_local_default(tmp_path, how):
    """Found: a top-level `Sweep(...).run()` without `if __name__ == "__main__":` (or piped to
    `python -`) failed with "Nanny failed to start", then StoreLocked."""
    import subprocess

    code = PLAIN_SCRIPT.replace("OUTPUT", repr(str(tmp_path / "out.zarr")))
    script = tmp_path / "plain.py"
    script.write_text(code)
    args = [sys.executable, str(script)] if how == "file" else [sys.executable, "-"]
    proc = subprocess.run(
        args,
        input=code if how == "stdin" else None,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "values [2.0, 4.0, 6.0]" in proc.stdout
    assert "Traceback" not in proc.stderr and "INFO" not in proc.stderr, proc.stderr[-2000:]


def test_the_local_worker_is_out_of_reach_of_a_terminals_ctrl_c():
    """A terminal sends SIGINT to its whole foreground process group: the worker (and the
    children it starts) must not get it, so that the client alone decides how to stop."""
    from distributed import Client

    from sweep.cluster.clusters import local_cluster

    with local_cluster(threads=1, dashboard="127.0.0.1:0") as cluster, Client(cluster) as client:
        (pid,) = client.run(os.getpid).values()
        assert os.getsid(pid) != os.getsid(0) and os.getpgid(pid) != os.getpgrp()


@pytest.mark.slow
def test_a_local_worker_killed_mid_sweep_is_started_again_and_the_sweep_finishes(tmp_path):
    """The local worker runs without a Nanny (one interpreter start less); its handle starts
    it again when it dies, as the Nanny did, and the points it was running run again."""
    from distributed import Client

    from sweep.cluster.clusters import local_cluster

    with local_cluster(threads=2, dashboard="127.0.0.1:0") as cluster, Client(cluster) as client:
        (pid,) = client.run(os.getpid).values()
        ds, _, _ = kill_the_worker_mid_sweep(client, tmp_path)
        (worker,) = cluster.workers.values()
        assert worker.restarts == 1
        (new_pid,) = client.run(os.getpid).values()
        assert new_pid != pid
    assert list(ds["status"].values) == ["done"] * 4
    assert list(ds["value"].values) == [0.0, 1.0, 2.0, 3.0]


def test_the_local_clusters_periodic_housekeeping_is_slowed_and_the_profiler_off():
    """The local scheduler and worker share the cores with the jobs: their system monitor runs
    every 2 s, the worker's memory monitor every 1 s, the tick every 0.5 s, no profiler."""
    from distributed import Client

    from sweep.cluster.clusters import local_cluster

    def intervals(dask_worker=None, dask_scheduler=None):
        server = dask_worker or dask_scheduler
        return {name: pc.callback_time for name, pc in server.periodic_callbacks.items()}

    with local_cluster(threads=1, dashboard="127.0.0.1:0") as cluster, Client(cluster) as client:
        scheduler = client.run_on_scheduler(intervals)
        (worker,) = client.run(intervals).values()
    assert scheduler["monitor"] == 2000 and scheduler["tick"] == 500
    assert worker["monitor"] == 2000 and worker["tick"] == 500 and worker["memory_monitor"] == 1000
    assert "profile" not in worker and "profile-cycle" not in worker


def test_dasks_debugging_logs_keep_50_of_a_sweeps_messages_not_1000():
    """Dask keeps each connection's last messages and each topic's last events; a sweep's are
    chunks of points, so the scheduler (in this process) and the local worker keep LOG_LENGTH."""
    import dask.config
    from distributed import Client

    from sweep.cluster.clusters import local_cluster
    from sweep.cluster.localworker import LOG_LENGTH

    def log_length(dask_worker=None):
        return dask.config.get("distributed.admin.low-level-log-length")

    with local_cluster(threads=1, dashboard="127.0.0.1:0") as cluster, Client(cluster) as client:
        for i in range(LOG_LENGTH + 20):
            client.log_event("sweep-test", {"i": i})
        events = client.get_events("sweep-test")
        (worker,) = client.run(log_length).values()
    assert LOG_LENGTH == 50 and log_length() == worker == LOG_LENGTH
    assert [e[1]["i"] for e in events] == list(range(20, LOG_LENGTH + 20))


def test_a_debugging_log_length_the_user_set_wins():
    code = (
        "import distributed, dask.config, sweep.cluster.clusters; "
        "print(dask.config.get('distributed.admin.low-level-log-length'))"
    )
    env = {**os.environ, "DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH": "7"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "7"


def test_the_local_workers_heartbeat_race_at_shutdown_is_not_printed():
    """Found in a benchmark run: a heartbeat meeting the scheduler's close printed a traceback
    on the user's terminal after a sweep that went well."""
    import logging

    from sweep.cluster.localworker import HeartbeatRace

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, msg, None, None)

    race = HeartbeatRace()
    assert not race.filter(record("Failed to communicate with scheduler during heartbeat."))
    assert race.filter(record("Unexpected exception during heartbeat. Closing worker."))


def test_the_local_cluster_refuses_clients_without_its_credentials():
    """Found: `kind: local` listened on tcp://127.0.0.1 with no security, so any user of the
    machine could connect and `client.run(os.getuid)` ran as the sweep's owner."""
    from distributed import Client
    from distributed.security import Security

    from sweep.cluster.clusters import local_cluster

    with local_cluster(dashboard="127.0.0.1:0") as cluster, Client(cluster) as owner:
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        assert list(owner.run(os.getuid).values()) == [os.getuid()]  # the owner works as before
        plain = cluster.scheduler_address.replace("tls://", "tcp://")
        for address, security in ((plain, None), (cluster.scheduler_address, Security.temporary())):
            with pytest.raises((OSError, TypeError)):  # handshake refused (or no TLS at all)
                Client(address, security=security, timeout=3, set_as_default=False)


def test_local_security_false_warns_and_listens_in_the_clear():
    from sweep.cluster.clusters import local_cluster

    with pytest.warns(SweepWarning, match="every user of this machine"):
        cluster = local_cluster(dashboard="127.0.0.1:0", security=False)
    with cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as an unprivileged user")
def test_another_user_cannot_connect_or_read_the_credentials_and_the_owner_can(tmp_path):
    import json
    import shutil
    import subprocess
    import tempfile
    import time

    import yaml

    from sweep import open_results
    from tests.helpers import JOBS, ROOT, unprivileged_user

    folder = Path(tempfile.mkdtemp(prefix="sweep-security-"))
    folder.chmod(0o755)  # another user may look in: what they find must be useless to them
    out = folder / "out.zarr"
    recipe = folder / "r.yaml"
    marks = folder / "marks"
    marks.mkdir()
    recipe.write_text(yaml.safe_dump({
        "job": f"{JOBS}:marked", "params": {"grid": {"x": list(range(6))},
        "fixed": {"folder": str(marks), "seconds": 3.0}}, "cluster": {"dashboard": "127.0.0.1:0"},
        "output": str(out),
    }))  # fmt: skip
    recipe.chmod(0o644)
    sweep = sweep_command()
    try:
        assert (
            subprocess.run([*sweep, "submit", str(recipe), "--detach"], cwd=ROOT, timeout=300).returncode == 0
        )
        state = json.loads((out / ".sweep-driver.json").read_text())
        assert state["scheduler"].startswith("tls://127.0.0.1:")
        for private in (out / ".sweep-driver.json", out / ".sweep-driver.log", Path(state["credentials"])):
            assert private.stat().st_mode & 0o077 == 0, private
        assert Path(state["credentials"]).parent.stat().st_mode & 0o077 == 0
        probe = (
            "import os, sys\nfrom distributed import Client\n"
            "try:\n    c = Client(sys.argv[1], timeout=5)\n    print('RAN AS', c.run(os.getuid))\n"
            "except Exception as e:\n    print('refused:', type(e).__name__)\n"
            "for path in sys.argv[2:]:\n    try:\n        open(path).read()\n        print('READ', path)\n"
            "    except OSError:\n        print('unreadable', path)\n"
        )
        with unprivileged_user("sweep-other") as other:
            env = {"PATH": os.environ["PATH"], "HOME": str(folder), "PYTHONPATH": str(ROOT)}
            seen = subprocess.run(
                ["runuser", "-u", other, "--", sys.executable, "-c", probe, state["scheduler"],
                 str(out / ".sweep-driver.json"), state["credentials"]],
                cwd=str(folder), env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert "refused:" in seen.stdout and "RAN AS" not in seen.stdout, seen.stdout + seen.stderr
            assert "READ" not in seen.stdout and seen.stdout.count("unreadable") == 2, seen.stdout
            theirs = subprocess.run(
                ["runuser", "-u", other, "--", *sweep, "cancel", str(out)],
                cwd=str(folder), env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert theirs.returncode == 2 and "belongs to root" in theirs.stderr, theirs.stderr
        # the owner's commands work as before
        deadline = time.monotonic() + 60
        while not list(marks.iterdir()):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        point = str(open_results(out)["point_id"].values[0])
        follow = subprocess.run([*sweep, "logs", str(out), "--point", point, "--follow"], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert follow.returncode == 0 and "Traceback" not in follow.stderr, follow.stderr
        cancel = subprocess.run(
            [*sweep, "cancel", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert cancel.returncode == 0 and "cancelled" in cancel.stdout, cancel.stderr
        # a driver SIGKILLed leaves its credentials; the next start removes them
        assert (
            subprocess.run([*sweep, "submit", str(recipe), "--detach"], cwd=ROOT, timeout=300).returncode == 0
        )
        state = json.loads((out / ".sweep-driver.json").read_text())
        os.kill(state["pid"], 9)
        deadline = time.monotonic() + 30
        while (out / ".sweep.lock").exists() and subprocess.run(
            [*sweep, "cancel", str(out)], cwd=ROOT, capture_output=True, text=True
        ).returncode == 0:
            assert time.monotonic() < deadline
        assert Path(state["credentials"]).exists()
        again = subprocess.run([*sweep, "submit", str(recipe), "--detach"], cwd=ROOT, timeout=300)
        assert again.returncode == 0 and not Path(state["credentials"]).exists()
        subprocess.run([*sweep, "cancel", str(out)], cwd=ROOT, capture_output=True, timeout=120)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
