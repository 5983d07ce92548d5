"""Core leases on a real Dask worker: disjoint cores, exclusive k=2 jobs, warm reuse."""

import os
import threading
import time
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from distributed import Client

from sweep import Sweep
from sweep.cluster.clusters import local_cluster, local_cores
from sweep.model.job import parse_job
from sweep.wire.childconfig import ChildConfig
from sweep.wire.placement import Placement
from sweep.wire.recycling import DEFAULT, Recycling
from sweep.worker.pool import CorePool
from tests.helpers import ROOT, job

needs_two = pytest.mark.skipif(local_cores() < 2, reason="needs 2 CPUs")


def job_ref(name):
    return parse_job(job(name))


@pytest.fixture
def pool():
    p = CorePool()
    p.setup()
    yield p
    p.teardown()


def _intervals(ds):
    s = ds["started"].values.ravel().astype("datetime64[ns]").astype(float)
    f = ds["finished"].values.ravel().astype("datetime64[ns]").astype(float)
    return sorted(zip(s, f))


@needs_two
def test_leases_are_disjoint_and_wait_for_free_cores(pool):
    two = tuple(sorted(os.sched_getaffinity(0)))[:2]
    pool.cores, pool._free = two, set(two)  # a 2-core worker, whatever this machine has
    got, order = [], []
    config = ChildConfig()
    with pool.lease(Placement(1), config) as a, pool.lease(Placement(1), config) as b:
        got = [a.cores, b.cores]

        def wide():
            with pool.lease(Placement(2), config) as c:
                order.append(("wide", c.cores))

        t = threading.Thread(target=wide)
        t.start()
        time.sleep(0.3)
        order.append(("narrow released", None))
    t.join(30)
    assert sorted(got) == [(two[0],), (two[1],)]
    assert order == [("narrow released", None), ("wide", two)]


def test_a_worker_with_the_pool_does_not_profile_its_task_threads(tmp_path):
    """They only wait on children; the profiler sampled each of them 100 times a second."""
    from distributed import LocalCluster

    with (
        LocalCluster(
            n_workers=1, processes=False, dashboard_address=None, resources={"threads": 1}
        ) as cluster,
        Client(cluster) as client,
    ):
        before = client.run(lambda dask_worker: set(dask_worker.periodic_callbacks))
        client.register_plugin(CorePool(), name=CorePool.name)
        after = client.run(lambda dask_worker: set(dask_worker.periodic_callbacks))
    assert all("profile" in names for names in before.values())
    assert all(not {"profile", "profile-cycle"} & names for names in after.values())


def test_warm_children_are_reused_by_later_leases(pool):
    with pool.lease(Placement(1), ChildConfig()) as first:
        pid = first.pid
    with pool.lease(Placement(1), ChildConfig()) as again:
        assert again.pid == pid
    with pool.lease(Placement(1), ChildConfig(), Recycling.of(1, None)) as c:
        c.jobs_run = 1
    with pool.lease(Placement(1), ChildConfig()) as fresh:
        assert fresh.pid != pid  # recycled after max_jobs
    assert pool.spawned == 2


@pytest.mark.slow
@needs_two
def test_concurrent_one_core_jobs_run_on_disjoint_cores(out):
    # a cluster of its own: on the session's, right after another test's cancel, the four
    # points sometimes ran one after another on one core (seen with distributed 2024.8.0)
    with local_cluster(dashboard="127.0.0.1:0") as cluster, Client(cluster) as client:
        s = Sweep(job("affinity"), {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"seconds": 1.0}}, output=out)
        ds = s.run(client=client, progress=False)
    assert (ds["status"] == "done").all()
    assert set(ds["cores"].values.tolist()) == {"0", "1"}
    # each child's own sched_getaffinity is exactly its lease
    assert (ds["ncpus"] == 1).all()
    assert (ds["cpu_sum"].values.astype(int).astype(str) == ds["cores"].values.astype(str)).all()
    # points that overlapped in time ran on different cores
    starts = ds["started"].values.astype(float)
    ends = ds["finished"].values.astype(float)
    cores = ds["cores"].values
    overlapping = 0
    for i in range(4):
        for j in range(i + 1, 4):
            if starts[i] < ends[j] and starts[j] < ends[i]:
                overlapping += 1
                assert cores[i] != cores[j]
    assert overlapping >= 1


def test_by_default_a_young_child_past_max_jobs_is_kept(pool):
    with pool.lease(Placement(1), ChildConfig()) as c:
        c.jobs_run = DEFAULT.max_jobs  # points of milliseconds: 500 of them in under a second
    with pool.lease(Placement(1), ChildConfig()) as again:
        assert again.pid == c.pid
    with pool.lease(Placement(1), ChildConfig(), replace(DEFAULT, min_life_s=0.0)) as c:
        pass
    with pool.lease(Placement(1), ChildConfig()) as fresh:
        assert fresh.pid != c.pid  # lived its minimum: replaced


def test_a_child_serving_its_last_jobs_is_replaced_by_one_started_meanwhile(pool):
    with pool.lease(Placement(1), ChildConfig(), Recycling.of(1, None)) as old:
        pool.replace_soon(old)
        assert old.run(job_ref("noop"), {}).status == "done"
    with pool.lease(Placement(1), ChildConfig()) as fresh:
        assert fresh.pid != old.pid and fresh.jobs_run == 0 and fresh.cores == old.cores
    assert pool.spawned == 2  # the second lease found the replacement ready: no start of its own
    pool.teardown()  # closes the idle children, and waits for the closes in the background
    assert not old.alive()


def test_a_replacement_not_needed_is_closed(pool):
    with pool.lease(Placement(1), ChildConfig(), Recycling.of(10, None)) as kept:
        pool.replace_soon(kept)
        spare = pool.renewal.replacement_of(kept).result()
    pool.teardown()  # waits for the background closes
    assert not spare.alive() and kept.pid != spare.pid


@pytest.mark.slow
@needs_two
def test_two_core_jobs_never_overlap(client, out):
    s = Sweep(
        job("affinity"),
        {"grid": {"x": [0, 1, 2]}, "fixed": {"seconds": 0.5}},
        resources={"threads": 2},
        output=out,
    )
    ds = s.run(client=client, progress=False)
    assert (ds["status"] == "done").all()
    assert (ds["ncpus"] == 2).all() and set(ds["cores"].values.tolist()) == {"0,1"}
    spans = _intervals(ds)
    for (_s0, e0), (s1, _) in zip(spans, spans[1:]):
        assert e0 <= s1, "two threads=2 jobs overlapped on a 2-core worker"
    assert np.all(ds["nproc_env"] == 2)


BENCH_JOB = f"{ROOT}/benchmarks/jobs.py"


@pytest.mark.slow
@needs_two
def test_prewarm_starts_one_child_per_k_cores_with_jax_imported_and_jobs_reuse_them(pool):
    from pathlib import Path

    from sweep.model.job import parse_job

    two = tuple(sorted(os.sched_getaffinity(0)))[:2]
    pool.cores, pool._free = two, set(two)
    config = ChildConfig(compile_cache=None)
    first = parse_job(f"{Path(BENCH_JOB).resolve()}:first_result", Path("."))
    assert pool.prewarm(Placement(1), config) == 2
    # a job that comes while they warm waits for a warm child instead of starting another
    with pool.lease(Placement(1), config) as child:
        record = child.run(first, {})
    assert record.outputs["jax_was_imported"].values == 1.0 and record.outputs["import_s"].values < 0.05
    deadline = time.monotonic() + 60
    while len(pool._idle) < 2:  # the other one finishes warming
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert pool.spawned == 2 and pool.prewarm(Placement(1), config) == 0  # never more than cores // k
    assert pool.prewarm(Placement(2), config) == 0  # no free 2-core set without closing warm children


@pytest.mark.slow
def test_prewarm_false_leaves_the_first_job_to_import_jax(client, tmp_path):
    params = {"zip": {"seed": [0]}}
    on = Sweep(
        BENCH_JOB + ":first_result", params, output=tmp_path / "on.zarr", child={"compile_cache": False}
    )
    ds = on.run(client=client, progress=False)
    assert float(ds["jax_was_imported"][0]) == 1.0  # its child warmed before the job came
    off = Sweep(
        BENCH_JOB + ":first_result",
        params,
        output=tmp_path / "off.zarr",
        child={"compile_cache": False, "prewarm": False},
        cluster={"dashboard": "127.0.0.1:0"},
    )
    ds = off.run(progress=False)  # its own local cluster: no child warmed before
    assert float(ds["jax_was_imported"][0]) == 0.0


@needs_two
def test_a_pool_starts_its_children_at_once_not_one_after_another(tmp_path, monkeypatch):
    """Each child, as it starts, waits (up to 20 s) for the other to have started too: started
    one after another, the first would wait alone and see one arrival."""
    site, arrived = tmp_path / "site", tmp_path / "arrived"
    site.mkdir()
    arrived.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, time\n"
        "from pathlib import Path\n"
        f"folder = Path({str(arrived)!r})\n"
        "(folder / str(os.getpid())).touch()\n"
        "end = time.monotonic() + 20\n"
        "def arrivals():\n"
        "    return len([p for p in folder.iterdir() if p.suffix != '.saw'])\n"
        "while arrivals() < 2 and time.monotonic() < end:\n"
        "    time.sleep(0.05)\n"
        "(folder / f'{os.getpid()}.saw').write_text(str(arrivals()))\n"
    )
    monkeypatch.setenv("SWEEP_LEASE_DIR", str(tmp_path / "leases"))
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    config = ChildConfig(env=(("PYTHONPATH", path),))
    pool = CorePool()
    pool.setup()
    try:
        threads = [
            threading.Thread(target=lambda: pool.lease(Placement(1), config).__enter__()) for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(int(p.read_text()) for p in arrived.glob("*.saw")) == [2, 2]
    finally:
        for child in list(pool.running.busy.values()):
            child[2].kill()
        pool.teardown()


@pytest.mark.slow
@pytest.mark.parametrize("child", [{}, {"max_jobs": 500}])
def test_a_sweep_of_points_of_milliseconds_recycles_its_children_as_its_recipe_says(client, out, child):
    # 550 points a core: past 500 jobs in each child. The default keeps a child younger than
    # MIN_LIFE_S; a max_jobs set in the recipe replaces it after 500 jobs, exactly.
    points = 550 * local_cores()
    s = Sweep(job("scaled"), {"zip": {"x": list(range(points))}}, child=child, output=out)
    ds = s.run(client=client, progress=False)
    assert (ds["status"] == "done").all()
    most = max(Counter(ds["pid"].values.tolist()).values())  # points of the busiest child
    assert most > 500 if not child else most <= 500
