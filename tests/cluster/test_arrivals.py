"""Reading batch jobs' logs for a worker that could not reach the scheduler
(sweep.cluster.arrivals); the real case, ``interface: lo`` on several nodes, is in
tests/cluster/test_nodes.py."""

from pathlib import Path
from types import SimpleNamespace

from sweep.cluster.arrivals import Arrivals, job_logs, unreached

FAILED = (
    "2026-12-05 17:40:01,000 - distributed.nanny - INFO - Start Nanny at: 'tls://10.0.0.2:4001'\n"
    "Traceback (most recent call last):\n"
    "OSError: Timed out trying to connect to tls://127.0.0.1:45633 after 30 s\n"
    "2026-12-05 17:40:31,000 - distributed.nanny - INFO - Closing Nanny\n"
)
REGISTERED = "2026-12-05 17:41:00,000 - distributed.worker - INFO - Registered to: tls://10.0.0.1:4000\n"


def logs(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_jobs_logs_are_found_by_its_number_alone(tmp_path):
    folder = logs(tmp_path, {"sweep-r-12.err": "", "sweep-r-123.err": "", "sweep.e12": ""})
    assert [p.name for p in job_logs(folder, "12")] == ["sweep-r-12.err", "sweep.e12"]
    assert [p.name for p in job_logs(folder, "123.pbs-server")] == ["sweep-r-123.err"]
    assert job_logs(tmp_path / "absent", "12") == []


def test_a_connect_timeout_is_read_with_the_workers_own_line(tmp_path):
    found = unreached(logs(tmp_path, {"sweep-r-7.err": FAILED}), "7")
    assert found is not None and found.address == "tls://127.0.0.1:45633"
    assert found.line == "OSError: Timed out trying to connect to tls://127.0.0.1:45633 after 30 s"
    assert found.log_file == tmp_path / "sweep-r-7.err"


def test_a_worker_that_registered_after_the_failure_has_arrived(tmp_path):
    assert unreached(logs(tmp_path, {"sweep-r-7.err": FAILED + REGISTERED}), "7") is None
    assert unreached(logs(tmp_path, {"sweep-r-8.err": REGISTERED + FAILED}), "8") is not None
    assert unreached(logs(tmp_path, {"sweep-r-9.err": REGISTERED}), "9") is None


def cluster(tmp_path: Path, here: list[str], **jobs: str) -> SimpleNamespace:
    """What Arrivals reads of a dask-jobqueue cluster: its jobs and the scheduler's workers."""
    return SimpleNamespace(
        scheduler_address="tls://127.0.0.1:45633",
        scheduler_info={"workers": {f"tls://w{i}": {"name": n} for i, n in enumerate(here)}},
        workers={n: SimpleNamespace(job_id=i, log_directory=str(tmp_path)) for n, i in jobs.items()},
    )


def test_no_worker_ever_arrived_ends_the_sweep_naming_the_interface(tmp_path):
    logs(tmp_path, {"sweep-r-7.err": FAILED, "sweep-r-8.err": ""})
    fatal, forget = Arrivals("lo").look(cluster(tmp_path, [], a="7", b="8"))
    assert forget == [] and fatal is not None
    assert "could not reach the scheduler at tls://127.0.0.1:45633" in fatal
    assert "Timed out trying to connect" in fatal and "cluster.interface is 'lo'" in fatal


def test_once_workers_arrived_a_job_that_could_not_connect_is_resubmitted(tmp_path):
    logs(tmp_path, {"sweep-r-7.err": FAILED, "sweep-r-8.err": REGISTERED})
    arrivals = Arrivals("ib0")
    assert arrivals.look(cluster(tmp_path, ["b"], a="7", b="8")) == (None, ["a"])
    # the arrival is remembered after the worker left: still a resubmit, not the end
    assert arrivals.look(cluster(tmp_path, [], a="7")) == (None, ["a"])
