from pathlib import Path

import pytest
from distributed import Client

from sweep.cluster import local_cluster

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "tests" / "jobs.py"


def job(name: str) -> str:
    """A recipe job reference to a function of tests/jobs.py."""
    return f"{JOBS}:{name}"


@pytest.fixture(scope="session")
def client():
    """One real LocalCluster for the session: one worker with every core, as `local` makes."""
    with local_cluster(dashboard="127.0.0.1:0") as cluster, Client(cluster) as c:
        yield c


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out.zarr"
