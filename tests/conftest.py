import logging
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from sweep.cluster import local_cores

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "tests" / "jobs.py"


def job(name: str) -> str:
    """A recipe job reference to a function of tests/jobs.py."""
    return f"{JOBS}:{name}"


@pytest.fixture(scope="session")
def client():
    """One real LocalCluster for the session: one worker with every core, as `local` makes."""
    n = local_cores()
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=n,
            resources={"threads": n},
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out.zarr"
