"""Progress without a terminal: plain log lines with counts, rate and ETA."""

from sweep.progress import SweepProgress


def test_plain_lines_when_not_a_terminal(capsys):
    with SweepProgress(10, already_done=2, log_every=0) as bar:
        assert not bar.live  # pytest captures stderr: not a terminal
        bar._t0 -= 4.0
        bar.on_event({"event": "start", "index": [3]})
        bar.job_finished((0,), "done")
        bar.job_finished((1,), "timeout")
        bar.refresh()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("[sweep] 4/10  done 3  failed 1  running 1  pending 5")
    assert "points/s, ETA" in lines[0]


def test_reports_are_kept_per_point():
    bar = SweepProgress(2, enabled=False)
    bar.on_event({"event": "report", "index": [1], "step": 4, "loss": 0.5, "worker": "tcp://x"})
    assert bar.snapshot()["latest"] == {(1,): {"step": 4, "loss": 0.5}}
