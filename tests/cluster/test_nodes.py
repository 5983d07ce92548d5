"""Sweeps on a real multi-node SLURM (scripts/slurm-nodes.sh: 3 nodes of 16 CPUs, each in
namespaces of its own): placement over nodes, a node killed, a network partition, partition
preemption, walltime and an unreachable interface, each asserted on the stored results.

Each node's core leases live in a folder of its own (``SWEEP_LEASE_DIR=.../$(hostname)`` in the
job script), as ``/tmp`` is each node's own on a real cluster; the nodes share every other
file, as a cluster's nodes share its file system.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask
import pytest
import yaml

from sweep import Sweep, open_results
from tests.cluster.conftest import Nodes
from tests.helpers import JOBS, alive, cli_submit

pytestmark = [pytest.mark.slow, pytest.mark.nodes]
WAIT_S = 240  # the longest any one event below may take before the test fails


UNDO = {"kill": "revive", "cut": "heal"}


class Cluster:
    """The nodes, for one test: what it kills or cuts is revived or healed after it."""

    def __init__(self, nodes: Nodes) -> None:
        self.nodes, self.undo = nodes, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.nodes, name)

    def act(self, action: str, node: str) -> None:
        self.nodes.run(action, node)
        self.undo.append((UNDO[action], node))


@pytest.fixture
def cluster(nodes: Nodes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Cluster]:
    """The nodes for one test, which starts on an empty queue and leaves one behind, whether it
    passed or not: its sweeps are cancelled (gates opened) and ended, its batch jobs gone, and
    what it killed or cut revived or healed."""
    monkeypatch.setenv("SLURM_CONF", str(nodes.conf))
    each = Cluster(nodes)
    _empty_queue()
    yield each
    if (tmp_path / "gate").is_dir():
        (tmp_path / "gate" / "open").touch()
    for running in Running.started:
        running.cancel.set()
    for running in Running.started:
        running.thread.join(WAIT_S)
    Running.started.clear()
    for action, node in each.undo:
        nodes.run(action, node)
    _empty_queue()


def _empty_queue() -> None:
    """Cancel every batch job on the nodes and wait until SLURM shows none."""
    subprocess.run(["scancel", "--partition=debug,urgent"], capture_output=True, check=False)
    wait_for("an empty queue", lambda: not queue())


def settings(nodes: Cluster, tmp_path: Path, **cluster: Any) -> dict[str, Any]:
    return {
        "kind": "slurm",
        "cores": 1,
        "memory": "1GiB",
        "jobs": 2,
        "queue": "debug",
        "walltime": "00:20:00",
        "interface": nodes.interface,
        "dashboard": "127.0.0.1:0",
        "shared_temp_directory": str(tmp_path / "tls"),
        "local_directory": str(tmp_path / "work"),
        "job_script_prologue": [f"export SWEEP_LEASE_DIR={tmp_path / 'leases'}/$(hostname)"],
        **cluster,
    }


def stepper(tmp_path: Path, points: int, steps: int, seconds: float, gate: bool = False) -> dict[str, Any]:
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    fixed: dict[str, Any] = {"steps": steps, "seconds": seconds, "folder": str(folder)}
    if gate:
        (tmp_path / "gate").mkdir()
        fixed["gate"] = str(tmp_path / "gate")
    return {"grid": {"x": list(range(points))}, "fixed": fixed}


def stepped_value(x: int, steps: int) -> float:
    value = float(x)
    for i in range(steps):
        value = value * 0.5 + i
    return value


class Running:
    """A sweep running in a thread; ``result()`` waits for its dataset. The ``cluster``
    fixture cancels those a test started and waits for them to end."""

    started: list[Running] = []

    def __init__(self, sweep: Sweep) -> None:
        self.out: dict[str, Any] = {}
        self.cancel = threading.Event()
        run = lambda: self.out.update(ds=sweep.run(progress=False, cancel=self.cancel))  # noqa: E731
        self.thread = threading.Thread(target=run)
        self.thread.start()
        Running.started.append(self)

    def result(self) -> Any:
        self.thread.join(WAIT_S * 2)
        assert not self.thread.is_alive(), "the sweep did not end"
        return self.out["ds"]


def wait_for(what: str, ready: Callable[[], Any], running: Running | None = None) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (found := ready()):
        assert running is None or running.thread.is_alive(), f"the sweep ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s"
        time.sleep(0.2)
    return found


def queue() -> dict[str, tuple[str, str]]:
    """The batch jobs of this cluster: id -> (state, node)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %T %N"], capture_output=True, text=True, check=True)
    return {
        f[0]: (f[1], f[2] if len(f) > 2 else "") for f in (line.split() for line in out.stdout.splitlines())
    }


def step_of(folder: Path, x: int) -> int:
    try:
        return int((folder / f"step-{x}").read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def runs(folder: Path) -> set[tuple[int, str, int]]:
    """The copies of points that ran steps so far: (x, host, child pid), per their markers."""
    return {
        (int(x), host, int(pid)) for x, host, pid in (p.name.split("-")[1:] for p in folder.glob("ran-*"))
    }


def ran_on(folder: Path, x: int) -> set[str]:
    """The hosts point ``x`` ran steps on."""
    return {host for y, host, _ in runs(folder) if y == x}


def ended(folder: Path, x: int, pid: int) -> bool:
    """Whether the copy of point ``x`` in child ``pid`` returned, or its child is gone (a warm
    child outlives the points it runs)."""
    return not alive(pid) or (folder / f"ended-{x}-{pid}").exists()


def test_a_sweep_spreads_over_three_nodes_with_leases_of_each_node(cluster, tmp_path):
    params = stepper(tmp_path, points=12, steps=4, seconds=0.3)
    ds = Sweep(
        f"{JOBS}:stepper", params, cluster=settings(cluster, tmp_path, jobs=6), output=tmp_path / "n.zarr"
    ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    hosts = ds["host"].values.tolist()
    assert set(hosts) == set(cluster.names), hosts
    assert {p.name for p in (tmp_path / "leases").iterdir()} == set(cluster.names)
    # each node leases its own 2 cores: points that ran at once on one node never shared a core,
    # while cores 0 and 1 are leased on every node
    spans = list(zip(hosts, ds["cores"].values.tolist(), ds["started"].values, ds["finished"].values))
    for i, (host, cores, start, end) in enumerate(spans):
        for other, other_cores, other_start, other_end in spans[i + 1 :]:
            if host == other and start < other_end and other_start < end:
                assert not set(cores.split(",")) & set(other_cores.split(",")), spans
    for host in cluster.names:
        assert {c for h, c, *_ in spans if h == host} <= {"0", "1"}
    local = Sweep(
        f"{JOBS}:stepper",
        params,
        cluster={"kind": "local", "threads": 2, "dashboard": "127.0.0.1:0"},
        output=tmp_path / "l.zarr",
    ).run(progress=False)
    assert ds["value"].values.tolist() == local["value"].values.tolist()
    assert ds["value"].values.tolist() == [stepped_value(x, 4) for x in range(12)]


def test_a_node_killed_mid_point_resumes_it_elsewhere_and_its_batch_job_runs_again(cluster, tmp_path):
    """SLURM requeues the batch job of a node that died and runs it again, under the same id, on
    another node: the lost point resumes from its checkpoint without spending a retry, and the
    job's second run is told apart from its first (``batch_job`` "ID (restart 1)", its log kept).
    The points wait at their end for a gate, so the job's second run starts a point for sure."""
    params = stepper(tmp_path, points=3, steps=8, seconds=0.5, gate=True)
    folder = tmp_path / "m"
    opts = settings(cluster, tmp_path, log_directory=str(tmp_path / "logs"))
    # dask-jobqueue would cancel a job whose worker stayed away this long; here SLURM's requeue runs
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "600s"}):
        running = Running(Sweep(f"{JOBS}:stepper", params, cluster=opts, output=tmp_path / "n.zarr"))
        # both jobs run a point (the survivor's then waits at the gate), one of them at step 3
        wait_for("points on two nodes", lambda: len({host for _, host, _ in runs(folder)}) == 2, running)
        x, *_ = wait_for(
            "a point at step 3", lambda: [y for y in range(3) if step_of(folder, y) >= 3], running
        )
        (host,) = ran_on(folder, x)
        job = wait_for(
            f"{host}'s batch job", lambda: next((j for j, (_, n) in queue().items() if n == host), None)
        )
        before = runs(folder)
        killed_at_step = step_of(folder, x)
        cluster.act("kill", host)
        # only the job's second run can start a point now: the other job's waits at the gate
        wait_for("a point run by the requeued job", lambda: runs(folder) - before, running)
        (tmp_path / "gate" / "open").touch()
        ds = running.result()
    assert (ds["status"] == "done").all(), ds["error"].values
    assert ds["value"].values.tolist() == [stepped_value(y, 8) for y in range(3)]
    assert (ds["attempts"] == 1).all(), ds["attempts"].values
    lost = ds.sel(x=x)
    assert lost["requeued"].item() == 1 and lost["host"].item() != host
    assert lost["start"].item() >= killed_at_step - 1 and lost["resumed_from"].item() == lost["start"].item()
    assert f"{job} (restart 1)" in ds["batch_job"].values.tolist(), ds["batch_job"].values
    (log,) = (tmp_path / "logs").glob(f"*-{job}.err")
    assert log.read_text().count("Start worker at") == 2  # both runs' logs, one after the other


def test_a_partitioned_node_that_heals_never_overwrites_the_copy_that_finished(cluster, tmp_path):
    """A node cut off the network keeps running its point while the sweep runs it again
    elsewhere (once the scheduler has lost the worker); the copy elsewhere finishes first, then
    the node heals and the stale copy ends too (its worker closes itself once its heartbeats
    fail): one stored result, the finished copy's, attempts unspent. Another point waits at the
    gate till the end, so the sweep still runs while the stale copy ends."""
    params = stepper(tmp_path, points=3, steps=8, seconds=0.5, gate=True)
    folder, gate = tmp_path / "m", tmp_path / "gate"
    running = Running(
        Sweep(f"{JOBS}:stepper", params, cluster=settings(cluster, tmp_path), output=tmp_path / "n.zarr")
    )
    wait_for("points on two nodes", lambda: len({host for _, host, _ in runs(folder)}) == 2, running)
    x, *_ = wait_for("a point at step 3", lambda: [y for y in range(3) if step_of(folder, y) >= 3], running)
    ((_, host, stale),) = [r for r in runs(folder) if r[0] == x]
    before = runs(folder)
    t0 = time.monotonic()
    cluster.act("cut", host)
    ((_, _, fresh),) = wait_for(
        "the point run again", lambda: [r for r in runs(folder) - before if r[0] == x], running
    )
    print(f"cut {host}: point {x} ran again after {time.monotonic() - t0:.1f} s")
    (gate / str(fresh)).touch()
    wait_for("the copy run again to end", lambda: ended(folder, x, fresh), running)
    cluster.nodes.run("heal", host)
    print(f"healed {host} after {time.monotonic() - t0:.1f} s")
    (gate / str(stale)).touch()
    wait_for("the stale copy to end", lambda: ended(folder, x, stale), running)
    print(f"the stale copy ended after {time.monotonic() - t0:.1f} s")
    (gate / "open").touch()
    ds = running.result()
    print(f"the sweep ended after {time.monotonic() - t0:.1f} s")
    assert (ds["status"] == "done").all(), ds["error"].values
    assert ds["value"].values.tolist() == [stepped_value(y, 8) for y in range(3)]
    assert (ds["attempts"] == 1).all(), ds["attempts"].values
    assert ds["pid"].sel(x=x).item() == fresh, "the stale copy's record replaced the one that finished"


def test_partition_preemption_requeues_the_points_without_spending_retries(cluster, tmp_path):
    """A job of the higher-priority partition ``urgent`` takes every CPU of every node: SLURM
    requeues the sweep's batch jobs (PreemptMode=REQUEUE); their points come back once it ends
    and resume from their checkpoints, attempts unspent."""
    params = stepper(tmp_path, points=2, steps=4, seconds=0.3, gate=True)
    folder, gate = tmp_path / "m", tmp_path / "gate"
    running = Running(
        Sweep(f"{JOBS}:stepper", params, cluster=settings(cluster, tmp_path), output=tmp_path / "n.zarr")
    )
    wait_for(
        "both points at their last step", lambda: all(step_of(folder, x) == 4 for x in range(2)), running
    )
    ours = set(queue())
    release = tmp_path / "release"
    urgent = subprocess.run(
        ["sbatch", "--parsable", "-p", "urgent", "-N", str(len(cluster.names)), "--exclusive",
         "-o", "/dev/null", "--wrap", f"while [ ! -e {release} ]; do sleep 0.2; done"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    t0 = time.monotonic()
    wait_for("the urgent job to run", lambda: queue().get(urgent, ("",))[0] == "RUNNING", running)
    print(f"the urgent job ran {time.monotonic() - t0:.1f} s after its submission")
    assert all(queue().get(j, ("PENDING",))[0] != "RUNNING" for j in ours)
    (gate / "open").touch()
    release.touch()
    ds = running.result()
    print(f"the sweep ended {time.monotonic() - t0:.1f} s after the urgent job's submission")
    assert (ds["status"] == "done").all(), ds["error"].values
    assert ds["value"].values.tolist() == [stepped_value(x, 4) for x in range(2)]
    assert (ds["attempts"] == 1).all() and (ds["requeued"] == 1).all(), ds[["attempts", "requeued"]]
    assert (ds["start"] == 4).all() and (ds["resumed_from"] == 4).all(), ds["start"].values


def test_an_interface_the_nodes_cant_reach_ends_submit_with_one_clear_error(cluster, tmp_path):
    """Found: with ``interface: lo`` the nodes' workers never reached the scheduler, their jobs
    ended, and `sweep submit` printed nothing and waited forever."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:noop",
                "params": {"grid": {"x": [1, 2, 3]}},
                "cluster": settings(cluster, tmp_path, interface="lo"),
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    t0 = time.monotonic()
    proc = cli_submit(recipe, timeout=WAIT_S)
    took = time.monotonic() - t0
    print(f"`sweep submit` ended after {took:.1f} s")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    said = proc.stderr
    assert "could not reach the scheduler" in said and "Timed out trying to connect" in said, said[-3000:]
    assert "cluster.interface" in said and "'lo'" in said, said[-3000:]
    ds = open_results(tmp_path / "out.zarr")  # the store is kept, resumable
    assert (ds["status"] == "pending").all() and ds.attrs["sweep_run_state"] == "failed"
    # COMPLETING: a job already ended (scancel'd), SLURM still tearing it down (seen once, CI)
    left = {job: state for job, state in queue().items() if state[0] != "COMPLETING"}
    assert not left, "the sweep left batch jobs behind"


def test_a_batch_job_warned_of_its_end_retires_and_its_replacement_picks_up(cluster, tmp_path):
    """``--signal=B:USR1@150`` with a 4-minute walltime: SLURM warns the job's shell (the
    exec'd nanny) 30-90 s into the job (up to a minute early); the worker retires, the point
    running there ends and is stored, and a new batch job runs the rest, no point killed or
    retried. Found: a warning that came as the worker started killed it (the nanny passed the
    signal on before the worker handled it)."""
    params = stepper(tmp_path, points=4, steps=2, seconds=0.1, gate=True)
    logs = tmp_path / "logs"
    options = settings(
        cluster, tmp_path, jobs=1, walltime="00:04:00", log_directory=str(logs),
        job_extra_directives=["--signal=B:USR1@150"],
    )  # fmt: skip
    running = Running(Sweep(f"{JOBS}:stepper", params, cluster=options, output=tmp_path / "n.zarr"))
    said = "retires: its batch job's end was signalled (SIGUSR1)"
    (first,) = wait_for("the first batch job", lambda: set(queue()), running)
    wait_for(
        "the warned worker to retire",
        lambda: said in "".join(p.read_text(errors="replace") for p in logs.glob(f"*{first}.err")),
        running,
    )
    (tmp_path / "gate" / "open").touch()
    ds = running.result()
    assert (ds["status"] == "done").all(), ds["error"].values
    assert ds["value"].values.tolist() == [stepped_value(x, 2) for x in range(4)]
    assert (ds["attempts"] == 1).all() and (ds["requeued"] == 0).all(), ds[["attempts", "requeued"]]
    jobs = ds["batch_job"].values.tolist()
    assert jobs.count(first) == 1, f"the warned job ran only the point it had started: {jobs}"
    assert len(set(jobs)) >= 2, jobs
