"""Fixtures shared by the tests; the helpers they use are in tests/helpers.py."""

import atexit
import os
import shutil
import tempfile

import pytest
from distributed import Client

from sweep.cluster.clusters import local_cluster
from tests.requirements import NEEDS

# an unmarked test takes at most this long (seconds, on an idle machine; scaled by the load of a
# busy one): a longer one is marked slow, so that `make test-fast` stays fast. 0 turns it off (the
# lowest versions' leg: older libraries are slower, and the newest stack's run keeps the rule)
FAST_LIMIT_S = float(os.environ.get("SWEEP_FAST_LIMIT_S", "3"))

# a running sweep publishes, refills and recounts every 0.5 s instead of 2 s (sweep/cadence.py),
# so that tests waiting for what it publishes wait less; CLI runs inherit it
os.environ.setdefault("SWEEP_REFRESH_S", "0.5")
# core leases are node-wide, per user (sweep/worker/leases.py): a test run beside another (a second
# clone, a user's own sweep) would wait for their cores. Each run leases in a folder of its own;
# workers, children and batch jobs the tests start inherit it. So does each test process of
# `pytest -n N`: it would otherwise inherit the folder of the process that started it
_OWN_LEASES = "SWEEP_TEST_LEASES_OF"  # which test process made SWEEP_LEASE_DIR
_process = os.environ.get("PYTEST_XDIST_WORKER", "main")
if "SWEEP_LEASE_DIR" not in os.environ or os.environ.get(_OWN_LEASES, _process) != _process:
    _leases = tempfile.mkdtemp(prefix="sweep-test-leases-")
    os.environ["SWEEP_LEASE_DIR"] = _leases
    os.environ[_OWN_LEASES] = _process
    atexit.register(shutil.rmtree, _leases, ignore_errors=True)


@pytest.fixture(scope="session")
def client():
    """One real LocalCluster for the session: one worker with every core, as `local` makes."""
    with local_cluster(dashboard="127.0.0.1:0") as cluster, Client(cluster) as c:
        yield c


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out.zarr"


def pytest_collection_modifyitems(config, items):
    """A test marked with a need of :data:`tests.requirements.NEEDS` is skipped, with the reason,
    on a machine without it."""
    for item in items:
        for name in {m.name for m in item.iter_markers()} & set(NEEDS):
            has, reason = NEEDS[name]
            if not has():
                item.add_marker(pytest.mark.skip(reason=reason))


# beside the other test processes of `pytest -n N` (`make test-main`), a test takes up to this
# many times its time alone, per process (measured: 2.3 s alone, 8.4 s beside one other, while
# the limit stayed 3.0 s: the 1-minute load average lags the burst)
SHARED_SLOWDOWN = 2.0
TEST_PROCESSES = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def fast_limit_s() -> float:
    """FAST_LIMIT_S on an idle machine, more in proportion to a busy one's load (the tests run
    beside other work: the same test takes longer there without being slower), and more again
    beside other test processes of the same run."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    shared = SHARED_SLOWDOWN * TEST_PROCESSES if TEST_PROCESSES > 1 else 1.0
    return FAST_LIMIT_S * max(1.0, load) * shared


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """An unmarked test that passed but took longer than :func:`fast_limit_s` fails: mark it
    ``slow`` (it still runs in `make test`) or make it faster."""
    outcome = yield
    report = outcome.get_result()
    if FAST_LIMIT_S and report.when == "call" and report.passed and item.get_closest_marker("slow") is None:
        limit = fast_limit_s()
        if call.duration > limit:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} is not marked slow but took {call.duration:.1f} s (over {limit:.1f} s): "
                "mark it @pytest.mark.slow or make it faster"
            )
