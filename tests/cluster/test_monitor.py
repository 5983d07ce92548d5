"""Watching sweeps: sweep.report streaming, the background handle, the /sweep page data."""

import json
import urllib.error
import urllib.request

import pytest

from sweep import Sweep, report, report_history
from tests.helpers import JOBS, wait_for


def test_report_outside_a_sweep_does_nothing():
    report(step=1, loss=0.5)  # no child, no error


@pytest.mark.slow
def test_reports_stream_to_the_client_before_the_job_ends(client, tmp_path):
    s = Sweep(
        f"{JOBS}:reporting",
        {"grid": {"x": [1.0, 2.0]}, "fixed": {"steps": 6, "seconds": 0.4}},
        output=tmp_path / "r.zarr",
    )
    run = s.start(client=client, progress=False)
    wait_for(lambda: run.progress().get("latest"))
    snapshot = run.progress()
    partial = run.results()
    assert not run.done()
    some_index, values = next(iter(snapshot["latest"].items()))
    assert "objective" in values and values["step"] >= 0
    assert partial["status"].values[some_index] == "pending"  # reported while still running
    ds = run.wait(120)
    assert (ds["status"] == "done").all()
    history = report_history(ds)
    assert len(history) == 12 and set(history["step"]) == set(range(6))
    assert str(history["time"].dtype) == "datetime64[ns, UTC]"
    # a table export flattens each point's reports to its last values
    import pandas as pd

    from sweep.store.results import export

    export(ds, tmp_path / "r.csv")
    table = pd.read_csv(tmp_path / "r.csv")
    assert "reports" not in table and table["last_objective"].tolist() == [6.0, 12.0]
    assert table["last_step"].tolist() == [5, 5]
    assert list(history[history["x"] == 2.0]["objective"]) == [2.0 * (i + 1) for i in range(6)]


@pytest.mark.slow
def test_history_of_a_killed_job_is_kept(client, tmp_path):
    s = Sweep(
        f"{JOBS}:reporting",
        {"grid": {"x": [1.0]}, "fixed": {"steps": 3, "seconds": 0.05, "hang": True}},
        resources={"timeout": "3s"},
        output=tmp_path / "k.zarr",
    )
    ds = s.run(client=client, progress=False)
    assert ds["status"].item() == "timeout"
    history = report_history(ds)
    assert list(history["step"]) == [0, 1, 2] and list(history["objective"]) == [1.0, 2.0, 3.0]


@pytest.mark.slow
def test_cancel_keeps_finished_points_and_a_rerun_finishes_the_rest(client, tmp_path):
    params = {"grid": {"x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}, "fixed": {"steps": 2, "seconds": 0.5}}
    s = Sweep(f"{JOBS}:reporting", params, output=tmp_path / "c.zarr")
    run = s.start(client=client, progress=False)
    wait_for(lambda: run.progress()["done"] >= 1)
    ds = run.cancel()
    done = int((ds["status"] == "done").sum())
    assert 1 <= done < 6
    again = Sweep(f"{JOBS}:reporting", params, output=tmp_path / "c.zarr").run(client=client, progress=False)
    assert (again["status"] == "done").all()


@pytest.mark.slow
def test_dashboard_sweep_page_serves_live_point_states(client, tmp_path):
    s = Sweep(
        f"{JOBS}:reporting",
        {"grid": {"x": [1.0, 2.0], "y": [0, 1]}, "fixed": {"steps": 8, "seconds": 0.3}},
        output=tmp_path / "d.zarr",
    )
    run = s.start(client=client, progress=False)
    base = client.dashboard_link.rsplit("/", 1)[0]

    def sweep_data():
        with urllib.request.urlopen(f"{base}/sweep/data.json", timeout=5) as r:
            data = json.load(r)
        return next((x for x in data["sweeps"] if x["name"] == s.loaded.name), {})

    def states():
        return {tuple(p["index"]): p for p in sweep_data().get("points", [])}

    wait_for(lambda: any(p["status"] == "running" and p.get("latest") for p in states().values()))
    live = states()
    assert len(live) == 4
    # what the run's workers held and its points used so far
    wait_for(lambda: (sweep_data().get("allocation") or {}).get("used_core_s", 0) > 0)
    cost = sweep_data()["allocation"]
    assert cost["held_core_s"] >= cost["used_core_s"] > 0 and cost["workers"] >= 1
    with urllib.request.urlopen(f"{base}/sweep", timeout=5) as r:
        assert b"latest objective" in r.read()
    run.wait(120)
    wait_for(lambda: all(p["status"] == "done" for p in states().values()), seconds=10)
    final = states()
    assert all(p["peak_threads"] > 0 and p["host"] for p in final.values())


def test_sweep_report_is_the_function_whatever_was_imported_first():
    import sweep
    import sweep.child.reporting

    assert sweep.report is sweep.child.reporting.report


def test_the_sweep_page_shows_the_memory_running_points_asked_of_the_workers(client, tmp_path):
    s = Sweep(
        f"{JOBS}:reporting",
        {"grid": {"x": [1.0]}, "fixed": {"steps": 10, "seconds": 0.3}},
        output=tmp_path / "m.zarr",
        resources={"memory": "100MiB"},
    )
    run = s.start(client=client, progress=False)
    base = client.dashboard_link.rsplit("/", 1)[0]

    def workers():
        try:
            with urllib.request.urlopen(f"{base}/sweep/data.json", timeout=5) as r:
                return json.load(r)["workers"]
        except urllib.error.HTTPError:  # the page is not registered yet
            return []

    wait_for(lambda: any(w["memory_asked"] == 100 << 20 for w in workers()))
    (worker,) = workers()
    assert worker["memory"] > 100 << 20 and worker["threads"] >= 1
    run.wait(120)
    wait_for(lambda: all(w["memory_asked"] == 0 for w in workers()), seconds=10)


@pytest.mark.slow
def test_a_resumed_sweeps_page_draws_the_curves_its_earlier_runs_stored(client, tmp_path):
    def grown(xs):
        fixed = {"steps": 4, "seconds": 0.05}
        return Sweep(
            f"{JOBS}:reporting",
            {"grid": {"x": xs}, "fixed": fixed},
            name="resumed",
            output=tmp_path / "r.zarr",
        )

    grown([1.0, 2.0]).run(client=client, progress=False)
    grown([1.0, 2.0, 3.0]).run(client=client, progress=False)  # runs x=3 only
    base = client.dashboard_link.rsplit("/", 1)[0]
    with urllib.request.urlopen(f"{base}/sweep/data.json", timeout=5) as r:
        (sweep,) = [s for s in json.load(r)["sweeps"] if s["name"] == "resumed"]
    points = {p["index"][0]: p for p in sweep["points"]}
    assert {i: p["status"] for i, p in points.items()} == {0: "done", 1: "done", 2: "done"}
    for i, x in enumerate([1.0, 2.0, 3.0]):  # the first two from the store, the third live
        assert points[i]["curves"]["objective"] == [[step, x * (step + 1)] for step in range(4)]
        assert points[i]["latest"] == {"step": 3, "objective": 4 * x, "other": -4 * x}
