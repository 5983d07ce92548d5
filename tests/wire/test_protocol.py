"""The parent <-> child messages and the point record (sweep/wire/protocol.py)."""

import os
import pickle

import pytest

from sweep.store import RECORD_VARS
from sweep.wire import protocol
from sweep.wire.jobref import JobRef
from sweep.wire.protocol import JobDone, Metrics, PointRecord, Report, RunJob


def test_messages_round_trip_through_a_pipe_in_order():
    r, w = os.pipe()
    metrics = Metrics(1.0, 0.5, 15, 2**20, (0,))
    sent = [
        RunJob(JobRef("module", "m", "f"), {"x": 1}),
        Report({"loss": 0.5}, 3, 1.0),
        JobDone({}, metrics),
    ]
    for m in sent:
        protocol.send(w, m)
    os.close(w)
    assert [protocol.receive(r) for _ in sent] == sent
    with pytest.raises(EOFError):
        protocol.receive(r)
    os.close(r)


def test_large_messages_are_framed_whole():
    r, w = os.pipe()
    big = Report({f"v{i}": float(i) for i in range(50_000)}, None, 0.0)  # > a pipe's buffer
    pid = os.fork()
    if pid == 0:  # the writer blocks until the reader drains the pipe
        os.close(r)
        protocol.send(w, big)
        os._exit(0)
    os.close(w)
    assert protocol.receive(r) == big
    os.waitpid(pid, 0)
    os.close(r)


def test_store_variables_are_the_records_stored_fields_with_status_last():
    assert list(RECORD_VARS)[-1] == "status"
    unstored = ("index", "outputs", "logs", "sources")
    assert set(RECORD_VARS) == {f for f in vars(PointRecord(())) if f not in unstored}
    assert RECORD_VARS["status"].fill == "pending" and RECORD_VARS["peak_rss"].dtype == "int64"


def test_a_record_gives_its_stored_values():
    rec = PointRecord((1,), cores=(2, 3), reports=[{"step": 0, "loss": 1.0}])
    assert rec.stored("cores") == "2,3"
    assert rec.stored("reports") == '[{"step": 0, "loss": 1.0}]'
    assert PointRecord(()).stored("reports") == ""
    back = pickle.loads(pickle.dumps(rec))
    assert (back.index, back.cores, back.reports) == (rec.index, rec.cores, rec.reports)


def test_a_report_row_carries_its_attempt():
    assert Report({"loss": 2.0}, 1, 5.0).row(attempt=2) == {"step": 1, "time": 5.0, "attempt": 2, "loss": 2.0}
