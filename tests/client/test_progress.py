"""Progress without a terminal: plain log lines with counts, rate and ETA."""

from sweep.client.progress import SweepProgress
from sweep.wire import events
from sweep.wire.protocol import PointRecord, Report


def test_plain_lines_when_not_a_terminal(capsys):
    with SweepProgress(10, already_done=2, log_every=0) as bar:
        assert not bar.live  # pytest captures stderr: not a terminal
        bar._t0 -= 4.0
        bar.on_event(events.from_msg(events.to_msg(events.PointStarted((3,), "h"))))
        bar.points_written([PointRecord((0,), status="done"), PointRecord((1,), status="timeout")])
        bar._t0 -= 4.0  # the rate halves before the closing refresh
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("[sweep] 4/10  done 3  failed 1  running 1  pending 5")
    assert "points/s, ETA" in lines[0]
    assert len(lines) == 1  # the closing refresh, same counts at a new rate, prints nothing more


def test_reports_are_kept_per_point():
    bar = SweepProgress(2, enabled=False)
    reported = events.PointReported.of((1,), Report({"loss": 0.5}, 4, 0.0), attempt=1)
    msg = {**events.to_msg(reported), "worker": "tcp://x"}  # Dask adds the sender
    bar.on_event(events.from_msg(msg))
    assert bar.snapshot()["latest"] == {(1,): {"step": 4, "loss": 0.5}}


def test_events_from_another_thread_while_the_loop_publishes_and_writes():
    """Found: at 128 concurrent points the driver died with "dictionary changed size during
    iteration" in running_points, called while the event thread added to it."""
    import threading

    bar = SweepProgress(200_000, enabled=False)
    done = threading.Event()

    def flood() -> None:  # a bounded flood: the loop below runs while it lasts
        for i in range(20_000):
            bar.on_event(events.PointStarted((i,), "h", (0,), 0.0))
            bar.on_event(events.PointReported.of((i,), Report({"loss": 1.0}, 1, 0.0), attempt=1))
        done.set()

    thread = threading.Thread(target=flood)
    thread.start()
    n = 0
    while not done.is_set():
        bar.running_points()
        bar.snapshot()
        bar.points_written([PointRecord((j,), status="done") for j in range(n * 50, n * 50 + 50)])
        n += 1
    thread.join()
    # points that ended are forgotten: what is kept is what runs now
    assert all(i not in bar.where for i in bar.finished)
    assert len(bar.where) + len(bar.finished) >= len(bar.latest)


def test_a_point_that_ended_is_not_running_before_it_is_written():
    bar = SweepProgress(2, enabled=False)
    bar.on_event(events.PointStarted((0,), "h", (1,), 5.0))
    assert [p["index"] for p in bar.running_points()] == [[0]]
    record = PointRecord((0,), status="done", host="h", cores=(1,))
    bar.on_event(events.from_msg(events.to_msg(events.PointEnded.of(record))))
    assert bar.running_points() == [] and bar.running == 0


def test_the_written_points_remembered_are_bounded(monkeypatch):
    from sweep.client import progress

    monkeypatch.setattr(progress, "FINISHED_KEPT", 100)
    bar = SweepProgress(1_000, enabled=False)
    bar.points_written([PointRecord((i,), status="done") for i in range(250)])
    assert bar.finished == {(i,) for i in range(150, 250)}  # the latest 100
    assert bar.counts["done"] == 250  # counting is not bounded
    bar.on_event(events.PointStarted((249,), "h", (0,), 0.0))  # a late start of a written point
    assert bar.running_points() == []
