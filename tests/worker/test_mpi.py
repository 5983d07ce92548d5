"""Points that are MPI programs (sweep/worker/mpi.py): Open MPI's mpirun and mpi4py, for real."""

import importlib.util
import os
import shutil
import uuid
from typing import Any

import psutil
import pytest
import yaml

from sweep import Sweep
from sweep.capacity import budget
from sweep.model.job import parse_job
from sweep.wire.placement import thread_budget
from sweep.worker import mpi
from tests.helpers import JOBS, cli, overlapping_pairs_share_no_core, submit_side_by_side, write_recipe

_MISSING = [
    what
    for what, found in (
        ("Open MPI's mpirun (scripts/system-deps.sh installs it)", shutil.which("mpirun")),
        ("mpi4py in this Python (the test extra)", importlib.util.find_spec("mpi4py")),
    )
    if found is None
]
needs_mpi = pytest.mark.skipif(bool(_MISSING), reason=f"needs {' and '.join(_MISSING)}")


# this test process's mark, inherited by every process its sweeps start (clusters, children,
# mpirun, ranks): leftovers() counts this test run's alone, not those of another run (or of
# another test file's MPI point on this run's other worker) on the same machine
MARK_VAR = "SWEEP_TESTS_MPI_MARK"
MARK = os.environ.setdefault(MARK_VAR, f"{os.getpid()}-{uuid.uuid4().hex[:8]}")


def leftovers() -> list[str]:
    """Command lines of MPI launchers and ranks of this tool that this test run started, still
    running."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        if "sweep.child.launch" in line or "@/tmp/sweep-mpi-" in line or "sweep-mpi-" in line:
            try:
                ours = p.environ().get(MARK_VAR) == MARK
            except psutil.Error:  # gone meanwhile
                continue
            if ours:
                found.append(line)
    return found


def two_ranks(tmp_path, name="m", **fixed) -> Sweep:
    return Sweep(
        f"{JOBS}:mpi_ranks",
        {"grid": {"x": [1, 2]}, "fixed": fixed},
        output=tmp_path / f"{name}.zarr",
        resources={"ranks": 2, "threads": 1},
    )


def one_point(tmp_path, fixed: dict, **resources) -> Any:
    """The dataset of one 2-rank point of ``mpi_ranks`` with ``fixed`` and ``resources``."""
    return Sweep(
        f"{JOBS}:mpi_ranks",
        {"grid": {"x": [1]}, "fixed": fixed},
        output=tmp_path / "one.zarr",
        resources={"ranks": 2, "threads": 1, **resources},
    ).run(progress=False)


def test_an_mpi_points_budget_is_each_ranks_plus_the_mpi_runtimes():
    assert (
        budget.point_budget(2, thread_budget(1)) == 2 * (17 + budget.RANK_THREADS) + budget.LAUNCHER_THREADS
    )


def test_a_missing_launcher_names_what_to_install(tmp_path):
    with pytest.raises(mpi.MpiMissing, match="apt-get install openmpi-bin"):
        mpi.launcher(str(tmp_path / "no-mpirun"))
    with pytest.raises(mpi.MpiMissing, match="Open MPI's mpirun"):
        mpi.launcher(shutil.which("true") or "/bin/true")


def test_a_job_importing_mpi4py_without_it_is_refused_naming_the_package(tmp_path, monkeypatch):
    job = tmp_path / "job.py"
    job.write_text("from mpi4py import MPI\n\ndef f(x):\n    return {'y': x}\n")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "mpi4py" else real(n, *a))
    with pytest.raises(mpi.MpiMissing, match="pip install mpi4py"):
        mpi.preflight(2, "", False, parse_job(f"{job}:f"))
    mpi.preflight(1, "", False, parse_job(f"{job}:f"))  # one rank: no MPI asked


@needs_mpi
@pytest.mark.slow
def test_two_ranks_run_the_job_each_on_its_own_core_and_rank_0s_result_is_stored(tmp_path):
    ds = two_ranks(tmp_path).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert ds["total"].values.tolist() == [3.0, 6.0]  # allreduce of x * (rank + 1) over 2 ranks
    for i in range(2):
        assert ds["rank_cores"].values[i].ravel().tolist() == [0.0, 1.0]  # rank r pinned to core r
        assert str(ds["cores"].values[i]) == "0,1"
        per_rank = [int(t) for t in str(ds["rank_threads"].values[i]).split(",")]
        assert len(per_rank) == 2 and 0 < max(per_rank) <= thread_budget(1) + budget.RANK_THREADS
        assert 0 < int(ds["peak_threads"].values[i]) <= int(ds["thread_budget"].values[i])
        assert all(int(m) > 0 for m in str(ds["rank_rss"].values[i]).split(","))
    assert ds["rank0_pid"].values[0] != ds["rank0_pid"].values[1]  # a fresh MPI world per point
    logs = cli("logs", str(tmp_path / "m.zarr"), "--where", "x=1").stdout
    assert "[1,0]<stdout>:rank 0 of 2" in logs and "[1,1]<stdout>:rank 1 of 2" in logs
    # a line printed in flushed parts is one tagged line (Open MPI tags each write)
    assert "[1,0]<stdout>:in parts from rank 0\n" in logs and "[1,1]<stdout>:in parts from rank 1\n" in logs
    assert not leftovers()


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize(
    ("fixed", "said"),
    [
        ({"die_rank": 1, "seconds": 1.0}, "rank 1 of an MPI point of 2 ranks died mid-job"),
        ({"fail_rank": 1, "seconds": 0.5}, "rank 1 of 2 failed:"),
    ],
)
def test_a_rank_that_dies_or_fails_fails_the_point_naming_it_and_leaves_nothing(tmp_path, fixed, said):
    ds = two_ranks(tmp_path, **fixed).run(progress=False)
    assert (ds["status"] == "failed").all()
    assert all(said in str(e) for e in ds["error"].values), ds["error"].values
    assert not leftovers()


@needs_mpi
@pytest.mark.slow
def test_a_timeout_ends_every_rank(tmp_path):
    ds = one_point(tmp_path, {"seconds": 60.0}, timeout="3s")
    assert (ds["status"] == "timeout").all(), ds["error"].values
    assert not leftovers()


@needs_mpi
@pytest.mark.slow
def test_a_two_rank_sweep_and_a_one_rank_sweep_side_by_side_never_share_a_core(tmp_path):
    params = {"grid": {"x": [1, 2, 3]}, "fixed": {"seconds": 1.0}}
    ranked, single = submit_side_by_side(
        tmp_path,
        {
            "ranked": {"job": "mpi_ranks", "params": params, "resources": {"ranks": 2}},
            "single": {"job": "busy", "params": params},
        },
    )
    assert (ranked["status"] == "done").all() and (single["status"] == "done").all()
    assert not overlapping_pairs_share_no_core(ranked, single)


@pytest.mark.slow
def test_validate_refuses_more_ranks_than_cores_and_a_missing_launcher(tmp_path):
    base = {"job": "mpi_ranks", "params": {"grid": {"x": [1]}}, "output": tmp_path / "v.zarr"}
    too_many = write_recipe(tmp_path / "many.yaml", **base, resources={"ranks": 64, "threads": 2})
    r = cli("validate", str(too_many))
    assert r.returncode == 2, r.stderr
    assert "resources.ranks=64 x resources.threads=2 = 128 cores per point" in r.stderr
    missing = write_recipe(
        tmp_path / "missing.yaml",
        **base,
        resources={"ranks": 2, "timeout": "5min"},
        child={"mpirun": str(tmp_path / "mpirun")},
    )
    r = cli("validate", str(missing))
    assert r.returncode == 2 and "child.mpirun" in r.stderr and "openmpi-bin" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@needs_mpi
def test_doctor_shows_the_mpi_it_would_use():
    from sweep.cli import doctor

    found = doctor._mpi()
    assert found["launcher"] == shutil.which("mpirun") and "Open MPI" in found["version"]
    assert doctor._mpi_text(found) == f"{shutil.which('mpirun')} ({found['version']})"
    assert doctor._mpi_text({"launcher": None, "why": "no mpirun on PATH"}) == "none: no mpirun on PATH"


def test_the_ranks_recipe_key_round_trips():
    recipe = yaml.safe_load("resources: {ranks: 2, threads: 3}")
    from sweep.model.recipe import Resources

    r = Resources(**recipe["resources"])
    assert (r.ranks, r.threads, r.cores) == (2, 3, 6)


def test_an_mpi_point_gets_a_timeout_from_expected_and_a_warning_without_either(tmp_path):
    """Found: a world with one rank asleep still burns CPU (the others busy-poll in the
    collective), so the stall watch never fires and, with no timeout, the point held its cores
    for ever."""
    import warnings

    from sweep.client import plan
    from sweep.errors import SweepWarning
    from sweep.model.recipe import Recipe

    def loaded(**resources):
        path = write_recipe(
            tmp_path / "m.yaml", job="mpi_ranks", params={"grid": {"x": [1]}}, resources=resources,
            output=tmp_path / "m.zarr",
        )  # fmt: skip
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            recipe = Recipe.load(path).recipe
        return recipe, [str(w.message) for w in seen if issubclass(w.category, SweepWarning)]

    recipe, said = loaded(ranks=2, expected="20s")
    assert plan.point_timeout(recipe) == 60.0 and not said
    recipe, said = loaded(ranks=2, expected="20s", timeout="5s")
    assert plan.point_timeout(recipe) == 5.0
    recipe, said = loaded(ranks=2)  # the stall watch judges each rank: no warning
    assert plan.point_timeout(recipe) is None and not said
    recipe, said = loaded(ranks=2, stall="none")
    assert plan.point_timeout(recipe) is None and any("would hold its cores for ever" in s for s in said)
    recipe, said = loaded(expected="20s")  # one process: the stall watch sees a hang
    assert plan.point_timeout(recipe) is None and not said


@needs_mpi
@pytest.mark.slow
def test_a_hung_rank_is_a_stall_while_rank_0_spins_and_nothing_is_left_running(tmp_path):
    """Found: rank 1 asleep while rank 0 busy-polls in an allreduce never tripped `stall: 5s`;
    the point ended at its 90 s timeout."""
    ds = one_point(tmp_path, {"hang_rank": 1}, stall="3s", timeout="90s")
    error = ds["error"].item()
    assert ds["status"].item() == "stalled" and "rank 1 used no CPU time" in error, error
    assert not leftovers()


@needs_mpi
@pytest.mark.slow
def test_a_hung_rank_times_out_by_expected_and_leaves_nothing_running(tmp_path):
    ds = one_point(tmp_path, {"hang_rank": 1}, expected="3s")
    error = ds["error"].item()
    assert ds["status"].item() == "timeout" and "timed out after 9 s" in error, error
    assert not leftovers()
