"""sweep.checkpoint / sweep.restore: a point goes on from its last checkpoint after a retry,
a lost worker and a killed driver, and ends with what an uninterrupted run computes."""

import json
import os
import signal
import subprocess
import threading

import dask.config
import numpy as np
import psutil
import pytest
from distributed import Client

from sweep import Sweep, open_results
from sweep.cluster.clusters import local_cluster
from sweep.model.job import parse_job
from sweep.store import checkpoints as stored
from sweep.wire.task import Limits
from sweep.worker.checkpoints import PointCheckpoints
from sweep.worker.child import Child
from tests.helpers import JOBS, ROOT, cli, job, run_then_resume, sweep_command, wait_for, write_recipe

STEPS = 8


def uninterrupted(x: int, steps: int = STEPS) -> float:
    value = float(x)
    for i in range(steps):
        value = value * 0.5 + i
    return value


def reached(marks, x: int, step: int) -> bool:
    """Whether tests/jobs.py:stepper at ``x`` has checkpointed step ``step`` (per its marker)."""
    text = (marks / f"step-{x}").read_text() if (marks / f"step-{x}").exists() else ""
    return text.isdigit() and int(text) >= step


def resumed_steps(ds, i: int = 0) -> list[tuple[int, int]]:
    """(attempt, step) of each report of point ``i``."""
    return [(r["attempt"], r["step"]) for r in json.loads(str(ds["reports"].values[i]))]


def test_a_child_saves_and_restores_through_its_parent():
    saved = []
    points = PointCheckpoints("test", None, saved.append, lambda: None)
    child = Child([sorted(os.sched_getaffinity(0))[0]])
    try:
        ref = parse_job(job("stepper"))
        first = child.run(ref, {"x": 3, "steps": 2, "seconds": 0}, checkpoints=points)
        assert first.status == "done" and first.checkpoints == 2 and first.resumed_from == 0
        assert [s.number for s in saved] == [1, 2]
        again = child.run(ref, {"x": 3, "steps": 4, "seconds": 0}, attempt=2, checkpoints=points)
        assert again.status == "done" and again.resumed_from == 2
        assert again.outputs["start"].values == 2.0
        assert again.outputs["value"].values == uninterrupted(3, 4)
        assert [s.number for s in saved] == [1, 2, 3, 4] and saved[-1].attempt == 2
    finally:
        child.close()


def test_a_checkpoint_over_the_cap_fails_the_job_naming_the_setting(tmp_path):
    child = Child([sorted(os.sched_getaffinity(0))[0]])
    try:
        record = child.run(parse_job(job("stepper")), {"steps": 1}, limits=Limits(checkpoint_bytes=10))
    finally:
        child.close()
    assert record.status == "failed"
    assert "over resources.checkpoint_bytes" in record.error and "save less" in record.error


def test_outside_a_sweep_checkpoint_does_nothing_and_restore_is_none():
    import sweep

    sweep.checkpoint({"a": 1})
    assert sweep.restore() is None


@pytest.mark.slow
def test_a_retried_point_goes_on_from_its_last_checkpoint(client, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    ds = Sweep(
        f"{JOBS}:stepper",
        {"grid": {"x": [1, 2]}, "fixed": {"folder": str(marks), "die_at": 5, "seconds": 0.05}},
        output=tmp_path / "out.zarr",
        resources={"retries": 1},
    ).run(client=client, progress=False)
    assert list(ds["status"].values) == ["done", "done"]
    assert list(ds["attempts"].values) == [2, 2]
    assert list(ds["resumed_from"].values) == [5, 5] and list(ds["checkpoints"].values) == [8, 8]
    assert list(ds["start"].values) == [5.0, 5.0]
    np.testing.assert_array_equal(ds["value"].values, [uninterrupted(1), uninterrupted(2)])
    assert resumed_steps(ds) == [(1, s) for s in range(5)] + [(2, s) for s in range(5, STEPS)]
    assert stored.kept(tmp_path / "out.zarr") == set()  # done points keep none


@pytest.mark.slow
def test_a_timed_out_point_goes_on_from_its_last_checkpoint(client, tmp_path):
    ds = Sweep(
        f"{JOBS}:stepper",
        {"grid": {"x": [4]}, "fixed": {"steps": 12, "seconds": 0.25}},
        output=tmp_path / "out.zarr",
        resources={"timeout": "2s", "retries": 2},
    ).run(client=client, progress=False)
    assert ds["status"].item() == "done" and ds["attempts"].item() >= 2
    assert ds["start"].item() > 0 and ds["resumed_from"].item() == ds["start"].item()
    assert ds["value"].item() == uninterrupted(4, 12)


def test_a_failed_point_keeps_its_checkpoint_for_the_next_submit(client, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "out.zarr"
    kw = dict(
        params={"grid": {"x": [7]}, "fixed": {"folder": str(marks), "die_at": 3, "seconds": 0.0}},
        output=out,
    )
    first = Sweep(f"{JOBS}:stepper", **kw).run(client=client, progress=False)
    assert first["status"].item() == "failed" and first["checkpoints"].item() == 3
    assert len(stored.kept(out)) == 1
    again = Sweep(f"{JOBS}:stepper", **kw).run(client=client, progress=False)
    assert again["status"].item() == "done" and again["resumed_from"].item() == 3
    assert again["value"].item() == uninterrupted(7) and again["start"].item() == 3.0
    assert stored.kept(out) == set()


@pytest.mark.slow
def test_a_point_whose_worker_is_lost_is_requeued_and_goes_on_from_its_checkpoint(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    result = {}
    with local_cluster(dashboard="127.0.0.1:0") as cluster, Client(cluster) as c:
        s = Sweep(
            f"{JOBS}:stepper",
            {"grid": {"x": [5]}, "fixed": {"folder": str(marks), "seconds": 0.5, "steps": 10}},
            output=tmp_path / "out.zarr",
        )
        t = threading.Thread(target=lambda: result.update(ds=s.run(client=c, progress=False)))
        t.start()
        wait_for(lambda: reached(marks, 5, 3), 120)
        (worker_pid,) = c.run(os.getpid).values()
        os.kill(worker_pid, signal.SIGKILL)  # the nanny starts a new worker; Dask reruns the task
        t.join(180)
    ds = result["ds"]
    assert ds["status"].item() == "done" and ds["attempts"].item() == 1
    assert ds["requeued"].item() == 1 and ds["resumed_from"].item() >= 3
    assert ds["start"].item() == ds["resumed_from"].item()
    assert ds["value"].item() == uninterrupted(5, 10)


@pytest.mark.slow
def test_a_killed_driver_resumes_from_the_stored_checkpoint(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "out.zarr"
    recipe = write_recipe(
        tmp_path / "recipe.yaml",
        job="stepper",
        params={"grid": {"x": [6]}, "fixed": {"folder": str(marks), "seconds": 0.4, "steps": 10}},
        output=out,
    )
    cmd = sweep_command("submit", str(recipe), "--no-progress")
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    wait_for(lambda: reached(marks, 6, 4), 120)
    tree = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    psutil.wait_procs(tree, timeout=15)
    (ident,) = stored.kept(out)
    kept = stored.read(out, ident).number
    assert open_results(out)["status"].item() == "pending"

    assert subprocess.run(cmd, cwd=ROOT, timeout=300).returncode == 0
    ds = open_results(out)
    assert ds["status"].item() == "done" and ds["resumed_from"].item() >= kept
    assert ds["start"].item() == ds["resumed_from"].item()
    assert ds["value"].item() == uninterrupted(6, 10)
    assert stored.kept(out) == set()
    logs = cli("logs", str(out))
    assert f"resumed from checkpoint {ds['resumed_from'].item()}" in logs.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra, since, compared",
    [
        ({}, 2, ("objective", "history", "design")),
        # at this rate the objective peaks at step 11 and falls after (measured): the best
        # design must come back from checkpoint 3 (step 15)
        ({"lr": 0.5, "keep_best": True}, 3, ("objective", "history", "design", "best_objective")),
    ],
)
def test_the_quickstart_job_resumed_from_a_checkpoint_ends_as_an_uninterrupted_run(extra, since, compared):
    job, params = f"{ROOT / 'recipes' / 'jobs' / 'fdfd.py'}:optimize", {"steps": 20, "checkpoint_every": 5}
    whole, resumed = run_then_resume(job, {**params, **extra}, since)
    assert whole.status == resumed.status == "done", whole.error + resumed.error
    assert whole.checkpoints == 3 and resumed.resumed_from == since
    assert resumed.checkpoints == 3 - since  # those after the one it resumed from
    for name in compared:
        np.testing.assert_array_equal(whole.outputs[name].values, resumed.outputs[name].values)


@pytest.mark.slow
def test_a_point_lost_more_often_than_dask_allows_fails_saying_why_and_keeps_its_checkpoint(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "out.zarr"
    params = {"grid": {"x": [2]}, "fixed": {"folder": str(marks), "seconds": 0.5, "steps": 10}}
    result = {}
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        local_cluster(dashboard="127.0.0.1:0") as cluster,
        Client(cluster) as c,
    ):
        s = Sweep(f"{JOBS}:stepper", params, output=out)
        t = threading.Thread(target=lambda: result.update(ds=s.run(client=c, progress=False)))
        t.start()
        wait_for(lambda: reached(marks, 2, 3), 120)
        (worker_pid,) = c.run(os.getpid).values()
        os.kill(worker_pid, signal.SIGKILL)
        t.join(180)
    ds = result["ds"]
    assert ds["status"].item() == "failed"
    error = ds["error"].item()
    assert "its worker was lost 1 time while running it" in error and "allowed-failures (0)" in error
    assert len(stored.kept(out)) == 1
    again = Sweep(f"{JOBS}:stepper", params, output=out).run(client=None, progress=False)
    assert again["status"].item() == "done" and again["resumed_from"].item() >= 3
    assert again["value"].item() == uninterrupted(2, 10)
