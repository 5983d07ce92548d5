"""Each fenced reach into a private or undocumented API (sweep/_compat.py), pinned."""

import os
import threading
import time

import pytest
from distributed import Client, LocalCluster, WorkerPlugin, get_worker
from distributed.core import Status

from sweep import _compat
from sweep.model.backends import CLASSES, cluster_class


def test_zarr_executor_is_the_pool_zarr_does_io_on_and_gets_all_its_threads():
    from zarr.core.sync import _get_executor

    _compat.start_zarr_io_threads(4)
    executor = _get_executor()
    assert executor._max_workers >= 1
    assert len(executor._threads) == executor._max_workers
    names = {t.name for t in threading.enumerate()}
    assert any(n.startswith("zarr_pool") for n in names), names


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_jobqueue_parameters_include_the_documented_options(kind):
    params = _compat.jobqueue_parameters(cluster_class(kind))
    # documented options of every dask-jobqueue cluster, and one of each scheduler's own
    assert {
        "cores",
        "memory",
        "job_extra_directives",
        "log_directory",
        "interface",
        "death_timeout",
    } <= params
    own = {
        "slurm": {"account", "walltime"},
        "pbs": {"resource_spec", "walltime"},
        "sge": {"resource_spec", "walltime"},
        "lsf": {"use_stdin", "walltime"},
        "htcondor": {"disk"},
        "oar": {"project", "walltime", "memory_per_core_property_name"},
    }
    assert own[kind] <= params


class Marker(WorkerPlugin):
    name = "sweep-test-marker"

    def setup(self, worker=None):
        self.address = worker.address


def test_the_scheduler_serves_http_on_a_tornado_application():
    from tornado.web import Application

    with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        assert isinstance(_compat.http_application(cluster.scheduler), Application)


def test_a_page_added_to_the_dashboard_is_in_the_navigation_bar_of_its_pages():
    import urllib.request

    with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        base = f"http://127.0.0.1:{cluster.scheduler.http_server.port}"
        with urllib.request.urlopen(f"{base}/workers", timeout=10) as r:
            assert 'href="added"' not in r.read().decode()
        assert _compat.add_dashboard_page(cluster.scheduler, "added")
        assert _compat.add_dashboard_page(cluster.scheduler, "added")  # once only
        for page in ("workers", "status", "tasks"):
            with urllib.request.urlopen(f"{base}/{page}", timeout=10) as r:
                html = r.read().decode()
            assert html.count('href="added"') == 1, page


def test_worker_plugins_are_read_and_installed_from_a_task():
    def install_then_read():
        worker = get_worker()
        assert _compat.worker_plugin(worker, Marker.name) is None
        _compat.install_worker_plugin(worker, Marker(), Marker.name)
        return _compat.worker_plugin(worker, Marker.name).address == worker.address

    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        assert client.submit(install_then_read).result(timeout=60)


def test_a_workers_task_profiler_is_its_profile_callbacks_and_stops_for_good():
    """The profiler samples the task threads from ``periodic_callbacks['profile']``; once
    stopped no sample is taken, though a task keeps running."""

    def samples(dask_worker):
        return dask_worker.profile_recent["count"]

    def busy():
        time.sleep(0.5)

    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        (worker,) = cluster.workers.values()
        assert {"profile", "profile-cycle"} <= set(worker.periodic_callbacks)
        client.submit(busy, pure=False).result()
        assert list(client.run(samples).values())[0] > 0  # sampled while the task ran
        stopped = client.run(lambda dask_worker: _compat.stop_task_profiler(dask_worker))
        assert list(stopped.values()) == [True]
        before = list(client.run(samples).values())[0]
        client.submit(busy, pure=False).result()
        assert list(client.run(samples).values())[0] == before
        assert not {"profile", "profile-cycle"} & set(worker.periodic_callbacks)


def test_a_jobqueue_cluster_starts_jobs_with_its_new_spec_class_and_resubmits_forgotten_ones(tmp_path):
    """SpecCluster builds each worker from ``new_spec["cls"]`` and, at ``scale``, starts one for
    every spec entry missing from ``workers``."""
    cls = cluster_class("slurm")
    started: list[str] = []

    class Recording(cls.job_cls):  # submits nothing: records the start and fails it
        async def start(self):
            started.append(self.name)
            self.status = Status.failed
            raise RuntimeError("not submitted")

    local = {"dashboard_address": ":0", "host": "127.0.0.1"}
    with cls(
        cores=1, memory="1GiB", processes=1, scheduler_options=local, log_directory=str(tmp_path)
    ) as cluster:
        _compat.set_batch_job_class(cluster, Recording)
        cluster.scale(jobs=1)
        deadline = time.monotonic() + 30
        while len(cluster.workers) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(started) == 1 and isinstance(next(iter(cluster.workers.values())), Recording)
        cluster.sync(_compat.forget_batch_jobs, cluster, list(cluster.workers))
        assert not cluster.workers
        cluster.scale(jobs=1)
        while len(started) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started[0] == started[1]  # the same spec entry, submitted again


STARTED = threading.Event()  # set by a task of an in-process worker


def _mark_started() -> bool:
    STARTED.set()
    return True


def test_a_workers_available_resources_decide_which_task_starts():
    """What sweep.worker.memorylease relies on: taking memory off ``available_resources`` on the
    worker's loop keeps a task that asks for it from starting until it is given back."""
    from distributed import Client

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, resources={"memory": 100},
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        worker = next(iter(cluster.workers.values()))
        total, available = _compat.worker_resources(worker)
        assert total == {"memory": 100} and available == {"memory": 100}
        _compat.on_worker_loop(worker, lambda: available.__setitem__("memory", 40))
        STARTED.clear()
        future = client.submit(_mark_started, resources={"memory": 50}, pure=False)
        assert not STARTED.wait(1.0)  # 40 left: the task waits
        _compat.on_worker_loop(worker, lambda: available.__setitem__("memory", 100))
        client.submit(int, resources={"memory": 1}, pure=False).result(timeout=10)  # it looks again
        assert future.result(timeout=10) is True


def test_a_nannys_worker_process_pid_is_read():
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        (nanny,) = cluster.workers.values()
        (pid,) = client.run(os.getpid).values()
        assert _compat.nanny_worker_pid(nanny) == pid
    assert _compat.nanny_worker_pid(object()) is None


def test_the_environment_snapshot_sees_every_change_made_through_os_environ(monkeypatch):
    before = _compat.environ_snapshot()
    monkeypatch.setenv("SWEEP_COMPAT_PROBE", "é1")
    after = _compat.environ_snapshot()
    assert after != before and after[b"SWEEP_COMPAT_PROBE"] == "é1".encode()
    assert {os.fsdecode(k): os.fsdecode(v) for k, v in after.items()} == dict(os.environ)
    monkeypatch.delenv("SWEEP_COMPAT_PROBE")
    assert _compat.environ_snapshot() == before


def test_setting_the_warnings_filters_back_lets_a_silenced_warning_through_again():
    import warnings

    before = list(warnings.filters)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("ignore")
            warnings.warn("once", UserWarning, stacklevel=1)  # noted as seen by this module's registry
            _compat.set_warnings_filters([("always", None, Warning, None, 0)])
            warnings.warn("once", UserWarning, stacklevel=1)
        assert [str(w.message) for w in caught] == ["once"]
    finally:
        _compat.set_warnings_filters(before)
    assert warnings.filters == before


def test_text_dtype_is_xarrays_variable_length_text_and_leaves_a_lazy_array_uncomputed():
    import dask.array as da
    import xarray as xr
    from xarray.backends.common import ensure_dtype_not_object
    from xarray.coding.strings import check_vlen_dtype
    from xarray.coding.variables import SerializationWarning

    dtype = _compat.text_dtype()
    assert check_vlen_dtype(dtype) is str
    lazy = da.full((3,), "", dtype=dtype, chunks=2)
    assert check_vlen_dtype(lazy.dtype) is str  # dask keeps the metadata
    var = xr.Variable(("p",), lazy)
    assert ensure_dtype_not_object(var, "p").data is lazy  # untouched: nothing computed
    plain = xr.Variable(("p",), da.full((3,), "", dtype=object, chunks=2))
    with pytest.warns(SerializationWarning, match="loaded into memory"):  # what it avoids
        assert not isinstance(ensure_dtype_not_object(plain, "p").data, da.Array)


def test_forgetting_package_listings_finds_a_distribution_its_cached_listing_missed(tmp_path, monkeypatch):
    from importlib.metadata import PackageNotFoundError, version

    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PackageNotFoundError):
        version("sweep-compat-probe")
    stat = tmp_path.stat()
    info = tmp_path / "sweep_compat_probe-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: sweep-compat-probe\nVersion: 1.0\n")
    os.utime(tmp_path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as if unchanged: listing kept
    with pytest.raises(PackageNotFoundError):
        version("sweep-compat-probe")
    _compat.forget_package_listings()
    assert version("sweep-compat-probe") == "1.0"
