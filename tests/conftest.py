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
def licenses(monkeypatch):
    """A plain amount in the table for the test's length (sweep/capacity/resources.py): a
    count, ``licenses``, of which the local worker offers 1 unless ``cluster.licenses`` says."""
    from sweep.capacity.resources import AMOUNTS, Amount

    amount = Amount("licenses", "solver licenses", local=lambda: 1.0)
    monkeypatch.setitem(AMOUNTS, amount.name, amount)
    return amount


@pytest.fixture
def scratch(monkeypatch):
    """A plain amount of bytes, ``scratch``, with no local default (see :func:`licenses`)."""
    from sweep.capacity.resources import AMOUNTS, Amount

    amount = Amount("scratch", "scratch space", size=True)
    monkeypatch.setitem(AMOUNTS, amount.name, amount)
    return amount


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


# the fast lane (`-m "not slow"`, `make test-fast`) is kept fast by measurement, not by failing
# single tests on a busy machine: the run ends with its slowest unmarked tests (each over
# FAST_LIMIT_S is named, to be marked slow or made faster), and on an idle machine the lane's
# whole wall time must stay within FAST_LANE_BUDGET_S
FAST_LANE_BUDGET_S = float(os.environ.get("SWEEP_FAST_LANE_BUDGET_S", "150"))
IDLE_LOAD = 1.25  # the 1-minute load per core at the end at most this: only the lane itself ran
_durations: dict[str, float] = {}
_started: list[float] = []


def pytest_sessionstart(session):
    import time

    _started.append(time.monotonic())


def pytest_runtest_logreport(report):
    """Note how long each unmarked test's call took (see FAST_LANE_BUDGET_S); in the process
    that reports, so under `pytest -n N` too."""
    if report.when == "call" and "slow" not in report.keywords:
        _durations[report.nodeid] = report.duration


def _fast_lane(config) -> bool:
    return (config.getoption("markexpr", "") or "").replace(" ", "") == "notslow"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The fast lane's slowest unmarked tests, and its wall time against its budget."""
    import time

    if not FAST_LIMIT_S or not _fast_lane(config) or not _started:
        return
    over = sorted(((d, n) for n, d in _durations.items() if d > FAST_LIMIT_S), reverse=True)
    wall = time.monotonic() - _started[0]
    say = terminalreporter.write_line
    say(
        f"fast lane: {len(_durations)} tests in {wall:.0f} s "
        f"(budget {FAST_LANE_BUDGET_S:.0f} s on an idle machine)"
    )
    for duration, name in over[:15]:
        say(f"  {duration:5.1f} s  {name}  (over {FAST_LIMIT_S:g} s: mark it slow or make it faster)")


def pytest_sessionfinish(session, exitstatus):
    """On an idle machine, a fast lane past its budget fails the run (a busy one says so only)."""
    import time

    if not FAST_LIMIT_S or not _fast_lane(session.config) or not _started or exitstatus != 0:
        return
    wall = time.monotonic() - _started[0]
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    if wall > FAST_LANE_BUDGET_S and load <= IDLE_LOAD:
        session.exitstatus = 1
        print(
            f"\nthe fast lane took {wall:.0f} s on an idle machine (load {load:.2f} per core), over its "
            f"budget of {FAST_LANE_BUDGET_S:.0f} s: mark the slowest tests above slow or make them faster"
        )
