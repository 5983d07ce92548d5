"""``resources.threads: auto``: the first points measure k, the rest run with the best
(sweep/client/autothreads.py)."""

import json
from pathlib import Path

import pytest
from distributed import Client

from sweep import Sweep
from sweep.client import autothreads
from sweep.client.autothreads import Calibration
from sweep.model.recipe import AUTO_CANDIDATES, Resources
from sweep.wire.placement import Placement, thread_budget
from sweep.wire.protocol import PointRecord
from sweep.wire.task import PointTask
from tests.helpers import JOBS, cli, write_recipe


def _task(i: int) -> PointTask:
    return PointTask(sweep="s", index=(i,), job=None, kwargs={})  # type: ignore[arg-type]


def _retune(task: PointTask, k: int) -> PointTask:
    return autothreads.placed(task, Placement(k, thread_budget(k)), enforce=False)


def _done(task: PointTask, wall: float, pid: int) -> PointRecord:
    return PointRecord(task.index, status="done", wall_s=wall, pid=pid)


def test_threads_auto_means_the_default_candidates_and_plans_with_the_smallest():
    r = Resources.model_validate({"threads": "auto"})
    assert r.threads_auto == AUTO_CANDIDATES and r.threads == 1
    assert Resources.model_validate({"threads_auto": [4, 2]}).threads == 2
    with pytest.raises(ValueError, match="not both"):
        Resources.model_validate({"threads": 2, "threads_auto": [1, 2]})
    with pytest.raises(ValueError, match="MPI points"):
        Resources.model_validate({"threads": "auto", "ranks": 2})
    with pytest.raises(ValueError, match="list of core counts"):
        Resources.model_validate({"threads_auto": [0, 2]})


def test_calibration_runs_the_smallest_k_first_then_the_others_then_gives_every_task_the_best():
    cal = Calibration((1, 2, 4), _retune)
    cal.fit(workers=[2], points=1000)  # 4 does not fit a 2-core worker
    assert cal.candidates == (1, 2)
    # 2 rounds of the worker's slots each: 4 points at k=1 (two slots), then 2 at k=2 (one);
    # k=1: 1.0 s a point (score 1.0); k=2: 0.4 s (score 1.25); each child's first point is a
    # cold one (slower), and is left out of the score where a warm child ran one
    walls = {1: [3.0, 3.0, 1.0, 1.2], 2: [5.0, 0.4]}
    pids = {1: [10, 11, 10, 11], 2: [20, 20]}
    ones = [cal.next(_task(i)) for i in range(4)]
    assert [t.placement.cores for t in ones] == [1, 1, 1, 1] and ones[0].placement.thread_budget == 17
    assert cal.next(_task(4)) is None  # k=2's points wait for k=1's to end
    for t in ones:
        cal.records_ended([_done(t, walls[1].pop(0), pids[1].pop(0))])
    twos = [cal.next(_task(i)) for i in range(4, 6)]
    assert [t.placement.cores for t in twos] == [2, 2] and twos[0].placement.thread_budget == 22
    assert cal.next(_task(6)) is None  # no point beyond the calibration's until it ends
    for t in twos:
        cal.records_ended([_done(t, walls[2].pop(0), pids[2].pop(0))])
    assert cal.chosen == 2 and cal.decided_here
    assert cal.next(_task(7)).placement.cores == 2
    s = cal.summary()
    assert s["measured"]["2"]["warm_walls"] == [0.4] and s["measured"]["1"]["warm_walls"] == [1.0, 1.2]


@pytest.mark.parametrize(("points", "measures_two"), [(300, False), (400, True)])
def test_the_larger_ks_are_measured_only_when_the_rest_of_the_sweep_repays_them(points, measures_two):
    """k=1's cold points take 3 s, its warm ones 1 s: measuring k=2 (two cold rounds, then one
    of k=1 again) costs ~9 s should k=2 lose: 5% of a rest of 180 s at k=1 on 2 slots, which
    364 points give (the 4 measured, then 180 rounds of 2)."""
    cal = Calibration((1, 2), _retune)
    cal.fit(workers=[2], points=points)
    ones = [cal.next(_task(i)) for i in range(4)]
    for t, wall, pid in zip(ones, [3.0, 3.0, 1.0, 1.0], [10, 11, 10, 11], strict=True):
        cal.records_ended([_done(t, wall, pid)])
    nxt = cal.next(_task(4))
    if measures_two:
        assert not cal.decided and nxt.placement.cores == 2
    else:
        assert cal.chosen == 1 and nxt.placement.cores == 1
        assert "larger ks not measured" in cal.reason and "~9 s" in cal.reason


def test_each_round_fills_every_workers_slots():
    cal = Calibration((1, 2, 4), _retune, rounds=1)
    cal.fit(workers=[8, 2], points=1000)
    ones = [cal.next(_task(i)) for i in range(10)]  # k=1: ten slots over both workers
    assert [t.placement.cores for t in ones] == [1] * 10 and cal.next(_task(10)) is None
    for i, t in enumerate(ones):
        cal.records_ended([_done(t, 1.0, i)])
    fours = [cal.next(_task(i)).placement.cores for i in range(10, 12)]  # k=4: two slots on the 8-core worker
    assert fours == [4, 4] and cal.next(_task(12)) is None


def test_a_k_whose_points_all_fail_loses_and_none_done_falls_back_to_the_smallest():
    cal = Calibration((1, 2), _retune, rounds=1)
    cal.fit(workers=[2], points=1000)
    for i in (0, 1):
        cal.records_ended([_done(cal.next(_task(i)), 9.0, i)])
    b = cal.next(_task(2))
    assert b.placement.cores == 2
    cal.records_ended([PointRecord(b.index, status="oom", pid=2)])
    assert cal.chosen == 1 and "most points" in cal.reason
    cal = Calibration((1, 2), _retune, rounds=1)
    cal.fit(workers=[2], points=10)
    for i in range(3):  # with no k=1 point done, k=2 is measured however short the sweep
        cal.records_ended([PointRecord(cal.next(_task(i)).index, status="failed", pid=i)])
    assert cal.chosen == 1 and "no calibration point" in cal.reason


def test_a_short_sweep_is_not_calibrated_and_a_resumed_one_keeps_its_choice():
    cal = Calibration((1, 2, 4), _retune)
    cal.fit(workers=[4], points=20)  # fewer than 2 x (8 + 4 + 2) calibration points
    assert cal.chosen == 1 and "not calibrated" in cal.reason
    resumed = Calibration((1, 2, 4), _retune, chosen=4)
    resumed.fit(workers=[4], points=1000)
    assert resumed.next(_task(0)).placement.cores == 4 and not resumed.decided_here


@pytest.mark.slow
@pytest.mark.parametrize(("power", "best"), [(0.0, 1), (2.0, 2)])
def test_a_sweep_measures_k_stores_the_choice_and_runs_the_rest_with_it(
    client: Client, tmp_path, monkeypatch: pytest.MonkeyPatch, power: float, best: int
):
    """A job that gains nothing from a second core runs on one; one whose time falls as 1/k^2
    runs on two (the session's worker has the machine's 2 cores). The sweep is too short to
    repay measuring k=2 (the test above): here it is measured whatever it costs."""
    monkeypatch.setattr(autothreads, "REPAY", float("inf"))
    n = 16
    s = Sweep(
        f"{JOBS}:core_scaled",
        {"zip": {"x": list(range(n))}, "fixed": {"seconds": 0.4, "power": power}},
        resources={"threads": "auto"},
        output=tmp_path / "o.zarr",
    )
    ds = s.run(client=client, progress=False)
    assert (ds["status"] == "done").all()
    stored = json.loads(ds.attrs[autothreads.ATTR])
    assert stored["chosen"] == best and stored["candidates"] == [1, 2]
    ks = [int(k) for k in ds["k"].values]
    calibrating = 2 * 2 + 2 * 1  # two rounds of the worker's slots at k=1, then at k=2
    assert ks[:calibrating] == [1, 1, 1, 1, 2, 2]  # the first points ran at each k in turn
    assert ks[calibrating:] == [best] * (n - calibrating)
    assert (ds["thread_budget"].values[calibrating:] == 12 + 5 * best).all()
    assert f"k = {best}" in autothreads.describe(ds.attrs[autothreads.ATTR])


@pytest.mark.slow
def test_status_and_results_say_what_auto_chose_and_a_resume_does_not_calibrate_again(tmp_path):
    def recipe_of(points: int) -> Path:
        return write_recipe(
            tmp_path / "auto.yaml",
            job=f"{JOBS}:core_scaled",
            params={"zip": {"x": list(range(points))}, "fixed": {"seconds": 0.3, "power": 2.0}},
            resources={"threads": "auto"},
            output=str(tmp_path / "auto.zarr"),
        )

    recipe = recipe_of(14)
    validated = cli("validate", str(recipe))
    assert validated.returncode == 0
    assert "threads=auto (the first points measure k = 1, 2, 4)" in validated.stdout
    assert cli("submit", str(recipe), "--no-progress").returncode == 0
    status = cli("status", str(tmp_path / "auto.zarr"))
    # 14 points of 0.3 s can't repay measuring k=2: k=1 is kept, and status says why
    assert "threads  auto chose k = 1 (the larger ks not measured: losing would cost" in status.stdout, (
        status.stdout
    )
    assert "threads: auto" in cli("results", str(tmp_path / "auto.zarr")).stdout
    recipe = recipe_of(18)  # grown by 4 points: they run with the stored k, none at another
    assert cli("submit", str(recipe), "--no-progress").returncode == 0
    from sweep import open_results

    ds = open_results(tmp_path / "auto.zarr")
    assert [int(k) for k in ds["k"].values[14:]] == [1, 1, 1, 1]


def test_validate_refuses_auto_with_ranks(tmp_path):
    recipe = write_recipe(
        tmp_path / "bad.yaml",
        job=f"{JOBS}:noop",
        params={"zip": {"x": [1, 2]}},
        resources={"threads": "auto", "ranks": 2},
        output=str(tmp_path / "bad.zarr"),
    )
    r = cli("validate", str(recipe))
    assert r.returncode != 0 and "threads: auto does not apply to MPI points" in r.stderr
    assert "Traceback" not in r.stderr
