"""Meep's MPI build running points of several ranks (recipes/meep_mpi.yaml).

These run in the MPI Meep environment (scripts/meep-mpi-env.sh: Debian's parallel Meep
unpacked beside the serial one), which `make test` builds and runs as its own leg; elsewhere
they skip.
"""

import numpy as np
import pytest

from sweep import Sweep
from tests.cluster.test_slurm import slurm, slurm_sweep  # noqa: F401 (slurm: a fixture)
from tests.helpers import ROOT, cli

pytestmark = [pytest.mark.slow, pytest.mark.mpi_meep]

RECIPE = ROOT / "recipes" / "meep_mpi.yaml"
JOB = f"{ROOT / 'recipes' / 'jobs' / 'meep_flux.py'}:transmission"


def test_two_ranks_give_the_flux_of_one_rank(client, tmp_path):
    params = {"grid": {"width": [0.4, 0.6]}, "fixed": {"resolution": 20}}
    by_ranks = {
        n: Sweep(JOB, params, output=tmp_path / f"r{n}.zarr", resources={"ranks": n}).run(
            client=client, progress=False
        )
        for n in (1, 2)
    }
    for n, ds in by_ranks.items():
        assert (ds["status"] == "done").all(), ds["error"].values
        assert (ds["processes"] == n).all() and (ds["rank"] == 0).all()
    one, two = by_ranks[1], by_ranks[2]
    np.testing.assert_allclose(two["flux"].values, one["flux"].values, rtol=1e-6)
    assert all(len(str(t).split(",")) == 2 for t in two["rank_threads"].values)
    assert (two["peak_threads"] <= two["thread_budget"]).all(), two["peak_threads"].values


def test_the_meep_mpi_recipe_runs_to_the_end_from_the_command_line(tmp_path):
    r = cli("submit", str(RECIPE), "--output", str(tmp_path / "m.zarr"), "--no-progress")
    assert r.returncode == 0, r.stderr
    status = cli("status", str(tmp_path / "m.zarr"))
    assert "done     3" in status.stdout, status.stdout


def test_a_batch_job_of_2_cores_runs_the_meep_points_on_2_ranks(slurm, tmp_path):  # noqa: F811
    s = slurm_sweep(tmp_path, {"grid": {"width": [0.5]}}, job=JOB, resources={"ranks": 2})
    ds = s.run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert int(ds["processes"].values[0]) == 2
    assert str(ds["batch_job"].values[0]).isdigit()
