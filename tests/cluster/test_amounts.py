"""What workers offer of the plain amounts, what a run says before any starts when a point asks
more, and that Dask packs points by them (sweep/cluster/amounts.py)."""

import pytest

from sweep import Sweep
from sweep.cluster import amounts
from sweep.cluster.amounts import AmountError
from sweep.cluster.clusters import ClusterError, batch_cluster, preflight
from sweep.cluster.plantext import plan_text
from sweep.model.recipe import ClusterSettings
from sweep.wire.placement import Placement
from tests.helpers import JOBS, intervals, overlapping, scheduler_and_workers

BATCH = {"kind": "slurm", "cores": 4, "memory": "8GiB", "interface": "lo"}


def test_the_local_worker_offers_the_key_else_the_local_default_and_a_batch_job_the_key(licenses, scratch):
    local = amounts.offered(ClusterSettings())
    assert local["licenses"] == 1.0 and "scratch" not in local  # no local default
    given = amounts.offered(ClusterSettings(licenses=3, scratch="1GB"))
    assert given["licenses"] == 3.0 and given["scratch"] == 1e9
    assert amounts.offered(ClusterSettings(**BATCH)) == {}
    assert amounts.offered(ClusterSettings(**BATCH, scratch="1GB")) == {"scratch": 1e9}
    assert amounts.offered(ClusterSettings(kind="address", address="tcp://127.0.0.1:1")) == {}


def test_a_batch_jobs_worker_offers_its_amounts_exactly(scratch, licenses, tmp_path):
    settings = ClusterSettings(**BATCH, scratch="5GB", licenses=1.5, shared_temp_directory=str(tmp_path))
    with batch_cluster(settings) as cluster:
        script = cluster.job_script()
    assert "--resources threads=4,memory=8589934592,scratch=5000000000,licenses=1.5 " in script


def test_a_point_asking_more_than_a_worker_offers_is_refused_before_anything_starts(licenses, scratch):
    two = Placement(amounts=(("licenses", 2.0),))
    with pytest.raises(AmountError, match=r"resources.licenses=2 but the local worker offers 1; lower"):
        preflight(ClusterSettings(), two)
    preflight(ClusterSettings(licenses=2), two)
    big = Placement(amounts=(("scratch", 4e9),))
    with pytest.raises(
        AmountError, match=r"a slurm job \(cluster.cores\) offers no scratch space; give cluster.scratch"
    ):
        preflight(ClusterSettings(**BATCH), big)
    with pytest.raises(AmountError, match=r"scratch=3.73 GiB but .* offers 1.86 GiB"):
        preflight(ClusterSettings(**BATCH, scratch=2e9), big)


def test_the_plan_says_the_amount_is_what_limits_the_points_at_once(licenses):
    where = Placement(amounts=(("licenses", 1.0),))
    text = plan_text(ClusterSettings(threads=2, licenses=1), where, 4)
    assert "licenses=1)" in text and "1 point of 1 core and licenses=1 at a time, limited by licenses" in text


@pytest.mark.slow
def test_the_local_worker_never_runs_more_points_than_its_amount_holds(licenses, tmp_path):
    ds = Sweep(
        f"{JOBS}:allocate",
        {"grid": {"x": [0, 1, 2]}, "fixed": {"mb": 1, "hold": 0.5}},
        output=tmp_path / "out.zarr",
        resources={"licenses": 1},
        cluster={"threads": 2, "dashboard": "127.0.0.1:0"},
    ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert not overlapping(intervals(ds)), intervals(ds)


@pytest.mark.slow
def test_workers_of_a_running_scheduler_run_what_their_amounts_hold_and_refuse_more(licenses, tmp_path):
    args = ["--nthreads", "2", "--resources", "threads=2,licenses=1"]
    with scheduler_and_workers(tmp_path, args) as address:
        cluster = {"kind": "address", "address": address}
        job, params = f"{JOBS}:allocate", {"grid": {"x": [0, 1]}, "fixed": {"mb": 1, "hold": 0.5}}
        too_many = Sweep(job, params, resources={"licenses": 2}, cluster=cluster, output=tmp_path / "a.zarr")
        with pytest.raises(ClusterError, match=r"resources.licenses=2 but the largest worker of .* offers 1"):
            too_many.run(progress=False)
        ds = Sweep(job, params, resources={"licenses": 1}, cluster=cluster, output=tmp_path / "b.zarr").run(
            progress=False
        )
    assert (ds["status"] == "done").all(), ds["error"].values
    assert not overlapping(intervals(ds)), intervals(ds)
