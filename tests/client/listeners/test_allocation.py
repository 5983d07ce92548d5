"""What a run's allocation cost (client/listeners/allocation.py): core-seconds held by its
workers, used by its points, lost to attempts that did not end done."""

import json
import threading

import pytest

from sweep import Sweep, open_results
from sweep.client.listeners.allocation import ATTR, Allocation, runs_of, shown, total
from tests.helpers import JOBS


def test_a_worker_holds_its_cores_from_its_start_until_last_seen():
    a = Allocation()
    a.worker("w", cores=4, since=100.0, now=110.0)
    a.worker("w", cores=4, since=100.0, now=130.0)  # seen again later
    assert a.figures(now=500.0)["held_core_s"] == 120.0  # gone after 130: held no longer


def test_a_done_point_uses_its_cores_from_its_first_start_and_retries_count_as_lost():
    a = Allocation()
    a.started((0,), cores=2, since=10.0)
    a.ended((0,), cores=2, started=14.0, finished=20.0, done=True, attempts=2)  # attempt 2 began at 14
    a.started((1,), cores=1, since=10.0)
    a.ended((1,), cores=1, started=10.5, finished=20.0, done=True)  # one attempt: its start-up is used
    f = a.close(now=30.0)
    assert (f["used_core_s"], f["lost_core_s"]) == (30.0, 8.0)


def test_a_requeued_start_loses_the_span_before_it_and_a_failed_point_all_of_its_own():
    a = Allocation()
    a.started((0,), cores=1, since=0.0)
    a.started((0,), cores=1, since=30.0)  # its worker lost: started again
    a.ended((0,), cores=1, started=30.0, finished=40.0, done=True)
    a.ended((1,), cores=1, started=0.0, finished=5.0, done=False)  # never announced, failed
    f = a.close(now=50.0)
    assert (f["used_core_s"], f["lost_core_s"]) == (45.0, 35.0)


def test_a_point_still_running_at_the_end_is_lost_up_to_the_end():
    a = Allocation()
    a.worker("w", cores=2, since=0.0, now=10.0)
    a.started((3,), cores=2, since=4.0)
    assert a.figures(now=10.0)["lost_core_s"] == 0.0  # running: not lost yet
    f = a.close(now=10.0)
    assert (f["used_core_s"], f["lost_core_s"], f["used_share"]) == (12.0, 12.0, 0.6)


def test_a_start_heard_on_the_event_thread_while_the_run_thread_sums_breaks_nothing():
    """Found at 12,800 slots (benchmarks/slots.py): a start noted on the client's event thread
    while the run's thread summed the running points stopped the sweep with "dictionary changed
    size during iteration". Here the start is heard just as the sum is half way."""
    summing, heard = threading.Event(), threading.Event()

    class HalfWay(dict):
        def values(self):
            them = iter(super().values())
            yield next(them)
            summing.set()
            heard.wait(0.5)  # the start is heard now, or waits for the sum to end
            yield from them

    sums = Allocation()
    sums.running = HalfWay({(0,): (0.0, 1), (1,): (0.0, 1)})

    def hear() -> None:
        summing.wait()
        sums.started((2,), 1, 0.0)
        heard.set()

    thread = threading.Thread(target=hear)
    thread.start()
    try:
        during = sums.figures(1.0)
    finally:
        summing.set()
        thread.join()
    assert during["used_core_s"] == 2
    assert sums.figures(1.0)["used_core_s"] == 3


def test_runs_add_up_and_a_line_says_them():
    runs = [
        {"run": "a", "held_core_s": 3600.0, "used_core_s": 1800.0, "lost_core_s": 0.0, "workers": 1},
        {"run": "b", "held_core_s": 3600.0, "used_core_s": 3600.0, "lost_core_s": 360.0, "workers": 2},
    ]
    both = total(runs)
    assert (both["held_core_s"], both["used_share"], both["workers"]) == (7200.0, 0.75, 3)
    assert shown(both) == (
        "2 core-h held by 3 workers, 1.5 used by points (75%), 0.1 lost to attempts that did not end done"
    )
    assert "by 1 worker," in shown(runs[0] | {"used_share": 0.5})


def test_a_store_without_figures_or_with_damaged_ones_has_no_runs():
    assert runs_of({}) == [] and runs_of({ATTR: "{not json"}) == [] and runs_of({ATTR: '{"a": 1}'}) == []
    assert runs_of({ATTR: json.dumps([{"run": "a"}])}) == [{"run": "a"}]


@pytest.mark.slow
def test_a_local_run_keeps_its_cost_per_run_in_the_store(tmp_path):
    s = Sweep(
        f"{JOBS}:fail_if",
        {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"bad": 1}},
        output=tmp_path / "out.zarr",
        cluster={"threads": 2, "dashboard": "127.0.0.1:0"},
    )
    s.run(progress=False)
    s.run(progress=False, only_failed=True)
    runs = runs_of(open_results(tmp_path / "out.zarr").attrs)
    assert len(runs) == 2 and runs[0]["run"] != runs[1]["run"]
    for run in runs:  # the worker held 2 cores at least as long as its points used
        assert 0 < run["used_core_s"] <= run["held_core_s"] and run["workers"] == 1
    assert runs[0]["lost_core_s"] > 0.0  # point 1 failed: its time was lost
    assert runs[1]["lost_core_s"] == runs[1]["used_core_s"]  # it failed again
