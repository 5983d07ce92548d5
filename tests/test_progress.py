"""Progress without a terminal: plain log lines with counts, rate and ETA."""

from sweep import events
from sweep.progress import SweepProgress
from sweep.protocol import PointRecord, Report


def test_plain_lines_when_not_a_terminal(capsys):
    with SweepProgress(10, already_done=2, log_every=0) as bar:
        assert not bar.live  # pytest captures stderr: not a terminal
        bar._t0 -= 4.0
        bar.on_event(events.from_msg(events.to_msg(events.PointStarted((3,), "h"))))
        bar.points_written([PointRecord((0,), status="done"), PointRecord((1,), status="timeout")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("[sweep] 4/10  done 3  failed 1  running 1  pending 5")
    assert "points/s, ETA" in lines[0]


def test_reports_are_kept_per_point():
    bar = SweepProgress(2, enabled=False)
    reported = events.PointReported.of((1,), Report({"loss": 0.5}, 4, 0.0), attempt=1)
    msg = {**events.to_msg(reported), "worker": "tcp://x"}  # Dask adds the sender
    bar.on_event(events.from_msg(msg))
    assert bar.snapshot()["latest"] == {(1,): {"step": 4, "loss": 0.5}}
