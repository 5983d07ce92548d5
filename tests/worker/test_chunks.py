"""Short points run as a chunk in one exchange with a child (``Child.run_many``), and the chunks
of a sweep (``run_points``). Real spawned children; the last test runs a real LocalCluster."""

import pytest

from sweep import Sweep
from sweep.model.job import parse_job
from sweep.model.space import point_id
from sweep.store.layout import LOGS
from sweep.wire.childconfig import ChildConfig
from sweep.wire.task import Limits
from sweep.worker.child import Child
from tests.helpers import job


@pytest.fixture
def child():
    c = Child([0], ChildConfig(cap=True))
    yield c
    c.kill()


def test_a_chunk_runs_every_job_and_keeps_each_ones_output_apart(child):
    records = child.run_many(parse_job(job("chatty")), [{"x": 0}, {"x": 1, "fail": 1}, {"x": 2}])
    assert [r.status for r in records] == ["done", "failed", "done"]
    assert "x=1 fails" in records[1].error and child.alive() and child.jobs_run == 3
    for x, r in enumerate(records):
        assert f"hello from {x}" in r.logs[0] and f"warning from {x}" in r.logs[0]
        assert all(f"from {other}" not in r.logs[0] for other in {0, 1, 2} - {x})


def test_output_a_job_did_not_flush_stays_with_that_job(child):
    records = child.run_many(parse_job(job("unflushed")), [{"x": 0}, {"x": 1}])
    assert records[0].logs == ["plain print from 0\nplain warning from 0\n"]
    assert records[1].logs == ["plain print from 1\nplain warning from 1\n"]


def test_a_job_that_prints_nothing_has_an_empty_log_before_and_after_one_that_prints(child):
    kwargs = [{"x": x, "how": "raise"} for x in (0, 1, 2)]  # only x == 1 prints (and fails)
    records = child.run_many(parse_job(job("crash")), kwargs)
    assert [r.status for r in records] == ["done", "failed", "done"]
    assert records[0].logs == [""] and records[2].logs == [""]
    assert records[1].logs == ["crashing by raise\n"]


def test_a_chunk_stops_at_the_job_that_killed_its_child(child):
    ref = parse_job(job("crash"))
    records = child.run_many(ref, [{"x": 0, "how": "exit"}, {"x": 1, "how": "exit"}, {"x": 2, "how": "exit"}])
    assert len(records) == 2 and records[0].status == "done"
    assert records[1].status == "failed" and records[1].exit_code == 3
    assert "crashing by exit" in records[1].output_tail
    assert not child.alive()


def test_a_job_killed_over_its_thread_budget_ends_the_chunk_there(child):
    """The child may have started the next job when the kill comes: that job is not charged."""
    kwargs = [{"n": 20}, {"n": 0}, {"n": 0}]
    records = child.run_many(parse_job(job("leave_threads")), kwargs, limits=Limits(max_threads=15))
    assert len(records) == 1 and records[0].status == "killed" and child.closed


@pytest.mark.slow
def test_a_chunks_timeout_counts_from_the_end_of_the_job_before(child):
    """Three 1.5 s jobs under a 4 s timeout all finish (4.5 s in all); a 30 s one times out."""
    ref = parse_job(job("square"))
    assert child.run(ref, {"x": 0}).status == "done"  # its imports, before any clock runs
    kwargs = [{"x": x, "seconds": 1.5} for x in range(3)] + [{"x": 3, "seconds": 30.0}]
    records = child.run_many(ref, kwargs, limits=Limits(timeout=4.0))
    assert [r.status for r in records] == ["done", "done", "done", "timeout"]
    assert [r.outputs["y"].values for r in records[:3]] == [0.0, 1.0, 4.0]


@pytest.mark.slow
def test_a_chunk_stops_after_a_job_its_child_cannot_undo(child):
    """A job that changed JAX's configuration leaves the rest of the chunk to another child."""
    records = child.run_many(parse_job(job("x64_dtype")), [{"enable": True}, {"enable": False}])
    assert len(records) == 1 and records[0].status == "done"
    assert child.unrestorable and child.alive()


@pytest.mark.slow
def test_a_sweeps_chunks_retry_a_crashed_point_and_keep_each_points_log(client, out):
    """Points short enough to run many to a task: the crashed one is retried on its own (one
    attempt in its chunk, one after), its chunk's other points run on in another child, and
    every point's log is its own."""
    xs = list(range(300))
    s = Sweep(job("chatty"), {"grid": {"x": xs}, "fixed": {"die": 150}}, resources={"retries": 1}, output=out)
    ds = s.run(client=client, progress=False)
    status = dict(zip(ds["x"].values.tolist(), ds["status"].values.tolist()))
    attempts = dict(zip(ds["x"].values.tolist(), ds["attempts"].values.tolist()))
    assert status[150] == "failed" and attempts[150] == 2
    assert all(status[x] == "done" and attempts[x] == 1 for x in xs if x != 150)
    logs = out / LOGS
    for x in (0, 149, 150, 151, 299):
        text = (logs / point_id({"x": x}) / "1.txt").read_text()
        assert f"hello from {x}\n" in text and text.count("hello from") == 1
