"""A run whose workers can't run its points ends with what to change (client/listeners/fit.py)."""

import pytest
from distributed import Client, LocalCluster

from sweep import Sweep, open_results
from sweep.cluster.clusters import ClusterError
from tests.helpers import JOBS


@pytest.mark.slow
@pytest.mark.timeout(60)  # before the fix: waited for ever
def test_a_worker_that_joins_without_the_threads_resource_ends_the_run(tmp_path):
    """Found: with no worker up at the start (a batch cluster whose jobs are queued), a worker
    that joined without ``--resources threads=N`` left the sweep waiting for ever, silently."""
    with (
        LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        s = Sweep(f"{JOBS}:noop", {"grid": {"x": [0, 1]}}, output=tmp_path / "out.zarr")
        with pytest.raises(ClusterError, match=r"offers threads=1 \(largest: 0\).*--resources threads=N"):
            s.run(client=client, progress=False, on_store=lambda: cluster.scale(1))
    assert list(open_results(tmp_path / "out.zarr")["status"].values) == ["pending", "pending"]
