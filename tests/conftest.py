"""Fixtures shared by the tests; the helpers they use are in tests/helpers.py."""

import atexit
import os
import shutil
import tempfile

import pytest
from distributed import Client

from sweep.cluster import local_cluster

# a running sweep publishes, refills and recounts every 0.5 s instead of 2 s (sweep/cadence.py),
# so that tests waiting for what it publishes wait less; CLI runs inherit it
os.environ.setdefault("SWEEP_REFRESH_S", "0.5")
# core leases are node-wide, per user (sweep/leases.py): a test run beside another (a second
# clone, a user's own sweep) would wait for their cores. Each run leases in a folder of its own;
# workers, children and batch jobs the tests start inherit it
if "SWEEP_LEASE_DIR" not in os.environ:
    _leases = tempfile.mkdtemp(prefix="sweep-test-leases-")
    os.environ["SWEEP_LEASE_DIR"] = _leases
    atexit.register(shutil.rmtree, _leases, ignore_errors=True)


@pytest.fixture(scope="session")
def client():
    """One real LocalCluster for the session: one worker with every core, as `local` makes."""
    with local_cluster(dashboard="127.0.0.1:0") as cluster, Client(cluster) as c:
        yield c


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out.zarr"
