"""Sweep events as Dask carries them (sweep/wire/events.py)."""

from sweep.cluster import dashboard
from sweep.cluster.dashboard import SweepPage
from sweep.wire import events


def test_events_survive_the_mapping_dask_carries_with_extra_keys():
    sent = [
        events.PointStarted((1, 2), "node1"),
        events.PointReported((1, 2), 3, {"loss": 0.5}, 1),
        events.CheckpointSaved((1, 2), 4, 2, 1024),
        events.PointSampled((1, 2), 14, 17, 1 << 20, 0.5, 1.0),
        events.PointEnded((1, 2), "done", "node1", (0,), 15, 1.5, 1),
        events.PointsEnded(
            (
                events.PointEnded((0,), "done", "n", (0,), 15, 0.001, 1),
                events.PointEnded((1,), "failed", "n", (1,), 15, 0.002, 2),
            )
        ),
    ]
    for e in sent:
        msg = {**events.to_msg(e), "worker": "tcp://127.0.0.1:1"}
        assert events.from_msg(msg) == e
    assert events.from_msg({"event": "unknown"}) is None
    assert events.from_msg("not a mapping") is None


def test_topics_name_their_sweep():
    assert events.sweep_of(events.topic("demo")) == "demo"
    assert events.sweep_of("other-topic") is None


def test_the_sweep_page_follows_a_points_life():
    page = SweepPage()
    t = events.topic("demo")
    announce = events.SweepAnnounced("grid", ["x"], {"x": [0, 1]}, 2, "jobs:f", [
        {"index": [0], "params": {"x": 0}, "status": "queued"},
        {"index": [1], "params": {"x": 1}, "status": "done"},
    ])  # fmt: skip
    page.log_event(t, events.to_msg(announce))
    page.log_event(t, events.to_msg(events.PointStarted((0,), "h")))
    page.log_event(t, events.to_msg(events.PointReported((0,), 2, {"loss": 0.25}, 1)))
    (sweep,) = page.snapshot()["sweeps"]
    first = sweep["points"][0]
    assert first["status"] == "running" and first["latest"] == {"step": 2, "loss": 0.25}
    page.log_event(t, events.to_msg(events.PointEnded((0,), "failed", "h", (1,), 15, 0.5, 2)))
    first = page.snapshot()["sweeps"][0]["points"][0]
    assert first["status"] == "failed" and list(first["cores"]) == [1] and first["attempts"] == 2
    page.log_event("not-a-sweep", events.to_msg(events.PointStarted((1,), "h")))
    assert page.snapshot()["sweeps"][0]["points"][1]["status"] == "done"
    chunk = events.PointsEnded((events.PointEnded((1,), "stalled", "h", (0,), 15, 3.0, 1),))
    page.log_event(t, events.to_msg(chunk))  # the ends of a chunk of short points, in one event
    assert page.snapshot()["sweeps"][0]["points"][1]["status"] == "stalled"


def test_the_sweep_page_counts_requeues_checkpoints_and_resumes():
    page = SweepPage()
    t = events.topic("long")
    announce = events.SweepAnnounced("grid", ["x"], {"x": [0]}, 1, "jobs:f", [
        {"index": [0], "params": {"x": 0}, "status": "queued"},
    ])  # fmt: skip
    page.log_event(t, events.to_msg(announce))
    page.log_event(t, events.to_msg(events.PointStarted((0,), "h1")))
    page.log_event(t, events.to_msg(events.CheckpointSaved((0,), 3, 1, 100)))
    page.log_event(t, events.to_msg(events.PointStarted((0,), "h2")))  # its worker was lost
    point = page.snapshot()["sweeps"][0]["points"][0]
    assert point["requeued"] == 1 and point["checkpoint"] == 3 and point["host"] == "h2"
    page.log_event(t, events.to_msg(events.PointEnded((0,), "oom", "h2", (0,), 15, 1.0, 1, 3)))
    point = page.snapshot()["sweeps"][0]["points"][0]
    assert point["status"] == "oom" and point["resumed_from"] == 3


def test_the_sweep_page_keeps_a_curve_per_metric_for_its_latest_points_and_live_samples():
    page = SweepPage()
    t = events.topic("grid")
    n = dashboard.CURVED_POINTS + 5
    announce = events.SweepAnnounced("grid", ["x"], {"x": list(range(n))}, n, "jobs:f", [
        {"index": [i], "params": {"x": i}, "status": "queued"} for i in range(n)
    ])  # fmt: skip
    page.log_event(t, events.to_msg(announce))
    page.log_event(t, events.to_msg(events.PointStarted((0,), "h")))
    page.log_event(t, events.to_msg(events.PointSampled((0,), 14, 17, 300 << 20, 1.5, 2.0)))
    for i in range(n):
        for step in range(3):
            page.log_event(
                t, events.to_msg(events.PointReported((i,), step, {"loss": 1.0 / (step + 1), "g": 2.0}, 1))
            )
    points = page.snapshot()["sweeps"][0]["points"]
    first = next(p for p in points if p["index"] == [0])
    assert first["live"] == {"threads": 14, "budget": 17, "rss": 300 << 20, "cpu_s": 1.5, "elapsed": 2.0}
    curved = [p for p in points if p.get("curves")]
    assert len(curved) == dashboard.CURVED_POINTS and "curves" not in first  # the oldest lost theirs
    assert curved[-1]["curves"]["loss"] == [[0, 1.0], [1, 0.5], [2, 1.0 / 3]] and "g" in curved[-1]["curves"]
    page.log_event(t, events.to_msg(events.PointEnded((0,), "done", "h", (0,), 15, 2.5, 1)))
    first = next(p for p in page.snapshot()["sweeps"][0]["points"] if p["index"] == [0])
    assert "live" not in first and first["ended_at"] > 0


def test_a_big_sweeps_page_counts_its_done_points_instead_of_keeping_them():
    page = SweepPage()
    t = events.topic("big")
    n = events.LISTED_POINTS + 1
    page.log_event(t, events.to_msg(events.SweepAnnounced("zip", ["i"], {}, n, "jobs:f", [])))
    ends = [events.PointEnded((i,), "done", "h", (0,), 15, 0.001, 1) for i in range(500)]
    ends.append(events.PointEnded((500,), "failed", "h", (0,), 15, 0.001, 1))
    page.log_event(t, events.to_msg(events.PointStarted((501,), "h")))
    page.log_event(t, events.to_msg(events.PointReported((499,), 1, {"loss": 0.5}, 1)))  # keeps curves
    page.log_event(t, events.to_msg(events.PointsEnded(tuple(ends))))
    (sweep,) = page.snapshot()["sweeps"]
    kept = {p["index"][0]: p["status"] for p in sweep["points"]}
    assert kept == {499: "done", 500: "failed", 501: "running"}
    assert sweep["counted"] == {"done": 499} and sweep["recent_ends"] == 499
    small = SweepPage()  # a sweep the page lists keeps every point
    t = events.topic("small")
    small.log_event(t, events.to_msg(events.SweepAnnounced("zip", ["i"], {}, 500, "jobs:f", [])))
    small.log_event(t, events.to_msg(events.PointsEnded(tuple(ends[:500]))))
    assert len(small.snapshot()["sweeps"][0]["points"]) == 500
