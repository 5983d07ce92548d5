"""Submitting points through a bounded window, several short points per task (sweep/client/window.py)."""

import time

import pytest
from distributed import Client

from sweep import Sweep
from sweep.client import window
from sweep.client.window import chunk_size
from sweep.wire.placement import Placement
from tests.helpers import JOBS


def test_chunks_hold_about_a_tenth_of_a_second_of_work_and_leave_the_end_to_every_slot():
    assert chunk_size([], left=10_000, slots=2) == 1  # nothing measured yet: one point per task
    assert chunk_size([0.0005] * 9, left=10_000, slots=2) == 200
    assert chunk_size([1e-6], left=100_000, slots=2) == window.MAX_CHUNK
    assert chunk_size([0.5, 2.0, 3.0], left=10_000, slots=2) == 1  # long jobs stay one per task
    assert chunk_size([0.0005], left=40, slots=2) == 10  # the end: a fair share of what is left


@pytest.mark.slow
def test_a_sweep_never_has_more_than_its_window_in_flight_and_runs_every_point(
    client: Client, tmp_path, monkeypatch
):
    in_flight: list[int] = []
    tasks: list[int] = []
    real_fill = window.Window.fill

    def fill(self):
        new = real_fill(self)
        in_flight.append(len(self.in_flight))
        tasks.append(len(new))
        return new

    monkeypatch.setattr(window.Window, "fill", fill)
    monkeypatch.setattr(window, "MIN_IN_FLIGHT", 3)
    monkeypatch.setattr(window, "IN_FLIGHT_PER_SLOT", 1)  # the session worker has 2 slots: 3 tasks at most
    xs = [float(x) for x in range(600)]
    ds = Sweep(f"{JOBS}:square", {"zip": {"x": xs}}, output=tmp_path / "o.zarr").run(
        client=client, progress=False
    )
    assert (ds["status"] == "done").all() and list(ds["y"].values) == [x * x for x in xs]
    assert max(in_flight) <= 3
    assert 3 < sum(tasks) < 600  # short points were run several per task


@pytest.mark.slow
def test_a_hundred_thousand_points_run_to_the_end(client: Client, tmp_path):
    """Found: 100,000 no-op points (a random space, Python API, local default) failed after 258
    points: the client lost its connection to the scheduler."""
    space = {"random": {"n": 100_000, "seed": 0, "axes": {"x": [0.0, 1.0]}}}
    s = Sweep(f"{JOBS}:scaled", space, output=tmp_path / "big.zarr")
    ds = s.run(client=client, progress=False)
    assert int((ds["status"] == "done").sum()) == 100_000
    assert s.stats["points_run"] == 100_000
    assert float(ds["value"].isel(point=-1)) == float(ds["x"].isel(point=-1))


def test_points_asking_memory_wait_for_a_worker_to_say_whether_it_offers_memory(tmp_path):
    """Found: with no worker up at the start of a run on a user's cluster, the first tasks went
    out without their memory ask (no worker was known to offer memory), so a worker offering
    1 GB that then joined ran points asking 4 GiB. Now nothing goes out until a worker is seen."""
    from distributed import LocalCluster

    from sweep import cadence
    from sweep.client.plan import placement, task_maker
    from sweep.client.window import Window

    with (
        LocalCluster(
            n_workers=0, processes=False, dashboard_address=None, resources={"threads": 2, "memory": 8e9}
        ) as cluster,
        Client(cluster) as client,
    ):
        s = Sweep(
            f"{JOBS}:noop", {"grid": {"x": [0, 1]}}, resources={"memory": "4GiB"}, output=tmp_path / "o.zarr"
        )
        make = task_maker(s.loaded, where=placement(s.recipe))
        tasks = iter([make((i,), {"x": i}) for i in range(2)])
        w = Window(client, tasks, 2, ["x"], "token", placement=Placement(memory=4 * 2**30))
        assert w.fill() == []  # no worker: whether memory is offered is unknown
        cluster.scale(1)
        client.wait_for_workers(1)
        time.sleep(cadence.refresh_s())  # the window recounts the workers at this cadence
        futures = w.fill()

        def asked(dask_scheduler):
            return [ts.resource_restrictions for ts in dask_scheduler.tasks.values()]

        while len(client.run_on_scheduler(asked)) < len(futures):  # the submits reach the scheduler
            time.sleep(0.05)
        restrictions = client.run_on_scheduler(asked)
        client.cancel(futures)
    assert len(futures) == 2
    assert restrictions == [{"threads": 1, "memory": 4 * 2**30}] * 2


def test_a_fill_goes_to_the_scheduler_as_one_graph_update_whatever_its_number_of_tasks(tmp_path):
    """At thousands of slots a graph update per task was most of the scheduler's time
    (benchmarks/slots.py): a fill's tasks of one resource ask now go out in one."""
    from distributed import LocalCluster
    from distributed.diagnostics.plugin import SchedulerPlugin

    from sweep.client.plan import placement, task_maker
    from sweep.client.window import Window

    class Updates(SchedulerPlugin):
        name = "count-graph-updates"

        def __init__(self) -> None:
            self.keys: list[int] = []

        def update_graph(self, scheduler, *, keys, **kwargs) -> None:
            self.keys.append(len(keys))

    with (
        LocalCluster(
            n_workers=1, processes=False, dashboard_address=None, resources={"threads": 4}
        ) as cluster,
        Client(cluster) as client,
    ):
        client.register_plugin(Updates())
        s = Sweep(f"{JOBS}:noop", {"grid": {"x": list(range(40))}}, output=tmp_path / "o.zarr")
        make = task_maker(s.loaded, where=placement(s.recipe))
        tasks = iter([make((i,), {"x": i}) for i in range(40)])
        w = Window(client, tasks, 40, ["x"], "token")
        futures = w.fill()

        def updates(dask_scheduler):
            return dask_scheduler.plugins[Updates.name].keys

        while sum(client.run_on_scheduler(updates)) < len(futures):  # the submit reaches the scheduler
            time.sleep(0.05)
        seen = client.run_on_scheduler(updates)
        client.cancel(futures)
    assert len(futures) == window.IN_FLIGHT_PER_SLOT * 4  # a window's worth: 4 slots
    assert seen == [len(futures)]
