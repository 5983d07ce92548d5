"""The start of a run (sweep/client/startup.py): a local worker starts with the run's pool."""

import pytest

from sweep import Sweep, _compat
from sweep.client import plan, startup
from sweep.store.layout import LOG_NAME, MARK
from sweep.wire.childconfig import ChildConfig
from sweep.worker.commands import PLUGIN_NAME
from tests.helpers import JOBS, wait_for


def _pool(dask_worker) -> tuple[int, int] | None:
    """(the identity of the worker's core pool, the children it has started), or None."""
    pool = _compat.worker_plugin(dask_worker, PLUGIN_NAME)
    return None if pool is None else (id(pool), pool.spawned)


@pytest.mark.slow  # a local cluster and its children start: ~2 s on an idle machine
def test_a_local_worker_joins_with_the_runs_pool_warming_and_setting_up_keeps_it(tmp_path):
    s = Sweep(f"{JOBS}:noop", {"grid": {"x": [0, 1]}}, output=str(tmp_path / "o.zarr"))
    config = ChildConfig()
    with startup.cluster(s.loaded, lambda reason: None, config, plan.placement(s.recipe)) as client:
        (joined,) = client.run(_pool).values()
        assert joined is not None, "the worker joined without the run's pool"
        cores = sum(w["resources"]["threads"] for w in client.scheduler_info()["workers"].values())
        wait_for(lambda: list(client.run(_pool).values())[0][1] == cores)  # its children warm
        (seen,) = client.run(_pool).values()
        startup.set_up_pool(client, s.loaded, config, plan.placement(s.recipe), own=True)
        (after,) = client.run(_pool).values()
        assert after == seen, "setting the run up replaced the pool and its warm children"


def test_an_output_folder_that_is_not_a_store_opens_before_any_cluster_starts(tmp_path):
    """A folder with files but no store metadata (a half store, another tool's folder) is
    refused when opened: no cluster is started for it, so nothing it prints (a busy dashboard
    port) joins the refusal."""
    out = tmp_path / "o.zarr"
    s = Sweep(f"{JOBS}:noop", {"grid": {"x": [0]}}, output=str(out))
    assert startup.opens_beside_cluster(s.loaded, force=False), "a new output overlaps the start"
    out.mkdir()
    assert startup.opens_beside_cluster(s.loaded, force=False), "an empty folder is a new output"
    (out / LOG_NAME).write_text("")  # a detached driver writes its log there before it opens the store
    assert startup.opens_beside_cluster(s.loaded, force=False), "a driver's log is not a store's data"
    (out / "x").mkdir()
    assert not startup.opens_beside_cluster(s.loaded, force=False)
    assert not startup.opens_beside_cluster(s.loaded, force=True), "--force deletes no user's folder"
    (out / MARK).write_text("")
    assert startup.opens_beside_cluster(s.loaded, force=True), "--force starts a store over: it has work"
