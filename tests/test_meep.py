"""Meep adjoint optimisations (recipes/jobs/meep_bend.py) as sweep points.

These run in the Meep environment (`make meep-env`: a venv over Debian's Python with its
`python3-meep` and numpy<2), which `make test` runs as its own leg; elsewhere they skip.
"""

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from sweep import Sweep, unpadded
from sweep.model.job import parse_job
from sweep.wire.childconfig import ChildConfig
from sweep.wire.placement import thread_budget
from sweep.wire.task import Limits
from sweep.worker.child import Child
from tests.helpers import ROOT, fakecpus_library, run_then_resume

pytestmark = [pytest.mark.slow, pytest.mark.meep]

JOB = f"{ROOT / 'recipes' / 'jobs' / 'meep_bend.py'}:optimize"
NODE = 128  # the emulated node's CPUs


@pytest.fixture(scope="module")
def fakecpus():
    """tests/fakecpus.c built: preloaded, an unpinned process sees ``FAKE_NCPUS`` CPUs."""
    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    folder = Path(tempfile.mkdtemp(prefix="sweep-meep-"))
    lib = fakecpus_library(folder)
    yield lib
    shutil.rmtree(folder, ignore_errors=True)


def test_meep_sweep_over_design_size_improves_every_design(client, tmp_path):
    s = Sweep.from_yaml(
        ROOT / "recipes" / "meep_bend.yaml",
        overrides=["params.fixed.steps=3"],
        output=tmp_path / "bend.zarr",
    )
    ds = s.run(client=client, progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert (ds["final"] > ds["initial"]).all(), (ds["initial"].values, ds["final"].values)
    assert ds["objective"].dims == ("size", "seed", "step")
    assert (ds["peak_threads"] <= thread_budget(1)).all(), ds["peak_threads"].values
    # the design grid follows the size: 13x13 cells at 1.2 um, 17x17 at 1.6 um, stored padded
    small, large = (unpadded(ds, "design", size=size, seed=0) for size in (1.2, 1.6))
    assert small.shape == (13, 13) and large.shape == (17, 17)
    assert np.isfinite(small).all() and np.isfinite(large).all()
    assert np.isnan(ds["design"].sel(size=1.2, seed=0).values[13:, :]).all()


def peak_threads(cap: bool, fakecpus: Path) -> int:
    config = ChildConfig(cap=cap, env=(("LD_PRELOAD", str(fakecpus)), ("FAKE_NCPUS", str(NODE))))
    child = Child([0], config)
    try:
        out = child.run(parse_job(JOB), {"size": 1.2, "steps": 1}, limits=Limits(timeout=300))
    finally:
        child.kill()
    assert out.status == "done", (out.error, out.output_tail)
    return out.peak_threads


def test_a_capped_meep_child_keeps_its_budget_on_a_big_node_an_uncapped_one_does_not(fakecpus):
    capped, uncapped = peak_threads(True, fakecpus), peak_threads(False, fakecpus)
    assert capped <= thread_budget(1), capped
    # uncapped, JAX and Meep's OpenMP size their pools to the node's 128 CPUs
    assert uncapped > NODE, uncapped
    print(f"Meep+JAX child on an emulated {NODE}-CPU node: capped {capped} threads, uncapped {uncapped}")


def test_the_meep_environment_has_numpy_1(tmp_path):
    """The leg exists for Meep's numpy 1.x build; a numpy 2 here would test nothing of it."""
    assert np.__version__.startswith("1."), np.__version__
    assert sys.prefix != sys.base_prefix  # a venv over the system Python, not the system itself


def test_a_bend_resumed_from_a_checkpoint_ends_as_an_uninterrupted_run():
    whole, resumed = run_then_resume(
        JOB, {"size": 1.2, "steps": 3}, 2, config=ChildConfig(compile_cache=None)
    )
    assert whole.status == resumed.status == "done", whole.error + resumed.error
    assert resumed.resumed_from == 2 and resumed.checkpoints == 1
    for name in ("objective", "design", "final"):
        np.testing.assert_array_equal(whole.outputs[name].values, resumed.outputs[name].values)
