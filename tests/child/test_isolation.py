"""A point's result never depends on which warm child ran it (found: trust issue)."""

import pytest

from sweep.model.job import parse_job
from sweep.wire.childconfig import ChildConfig
from sweep.wire.placement import Placement
from sweep.worker.pool import CorePool
from tests.helpers import job

CONFIG = ChildConfig(cap=True, compile_cache=None)


@pytest.fixture
def pool(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_LEASE_DIR", str(tmp_path))
    p = CorePool()
    p.setup()
    yield p
    p.teardown()


def run(pool, name, **kwargs):
    with pool.lease(Placement(1), CONFIG) as child:
        return child.run(parse_job(job(name)), kwargs)


@pytest.mark.slow
def test_a_job_that_turns_on_x64_does_not_leak_it_to_the_next(pool):
    """Found: with one core, a job calling jax.config.update("jax_enable_x64", True) made the
    next points of the sweep compute in float64 in the same child."""
    first = run(pool, "x64_dtype", enable=True)
    assert first.status == "done" and first.outputs["x64"].values == 1.0
    second = run(pool, "x64_dtype")
    assert second.status == "done", second.error
    assert second.outputs["x64"].values == 0.0
    assert second.pid != first.pid  # the changed child was replaced, not reused


def test_cwd_environment_signals_and_a_closed_stdout_are_restored_in_the_same_child(pool):
    """Found: a job that closed its stdout made a later job in the same child fail with
    `OSError: [Errno 9] Bad file descriptor` on its first print."""
    first = run(pool, "meddle")
    second = run(pool, "meddle")
    assert first.status == second.status == "done", second.error
    assert second.pid == first.pid  # restorable: the warm child is kept
    found = {k: v.values for k, v in second.outputs.items() if k != "pid"}
    assert found == {"cwd_is_tmp": 0.0, "env_set": 0.0, "handler_set": 0.0}


@pytest.mark.slow
def test_a_job_that_leaves_jax_config_alone_keeps_its_warm_child(pool):
    first = run(pool, "x64_dtype")
    second = run(pool, "x64_dtype")
    assert second.pid == first.pid and pool.spawned == 1


def test_a_failed_import_that_left_a_package_half_imported_replaces_the_child(pool, tmp_path):
    """Found under `ulimit -u`: an import of jax that failed midway left its submodules loaded;
    the retry in the same child failed with `partially initialized module 'jax'` instead."""
    pkg = tmp_path / "halfpkg"
    pkg.mkdir()
    (pkg / "version.py").write_text("v = 1\n")
    flag = tmp_path / "fail-once"
    flag.write_text("")
    (pkg / "__init__.py").write_text(
        "import os\nimport halfpkg.version\n"
        f"if os.path.exists({str(flag)!r}):\n    os.remove({str(flag)!r})\n"
        "    raise RuntimeError('can not start new thread')\n"
        "x = halfpkg.version.v\n"
    )
    first = run(pool, "failing_import", folder=str(tmp_path))
    assert first.status == "failed" and "can not start new thread" in first.error
    second = run(pool, "failing_import", folder=str(tmp_path))
    assert second.status == "done", second.error
    assert second.pid != first.pid  # the half-imported child was replaced


def test_every_piece_of_process_state_a_job_changes_is_put_back_in_the_same_child(pool):
    """Found: a job's umask 0o777, RLIMIT_NOFILE of 64 and all-CPU affinity reached the next jobs
    of its warm child, undoing the cap. The job changes every piece of state the child restores
    (sweep/child/isolation.py, sweep/child/processstate.py); the next sees the first's."""
    first = run(pool, "process_state")
    second = run(pool, "process_state", change=False)
    assert first.status == second.status == "done", (first.error, second.error)
    assert second.pid == first.pid  # all of it restorable in place: the warm child is kept
    seen = [{k: v.values for k, v in r.outputs.items() if k != "pid"} for r in (first, second)]
    assert seen[1] == seen[0]
    assert seen[0]["ncpus"] == 1.0 and seen[0]["umask"] != 0o777 and seen[0]["gc"] == 1.0


@pytest.mark.parametrize("leftover", ["leave_thread", "leave_file"])
def test_a_thread_or_file_left_open_retires_the_child_before_the_next_job(pool, tmp_path, leftover):
    """A leftover thread used to count against the next points' thread budgets."""
    kwargs = {"leave_thread": True} if leftover == "leave_thread" else {"leave_file": str(tmp_path / "f")}
    first = run(pool, "process_state", change=False, **kwargs)
    second = run(pool, "process_state", change=False)
    assert first.status == second.status == "done", (first.error, second.error)
    assert second.pid != first.pid
    assert second.outputs["py_threads"].values == first.outputs["py_threads"].values
    assert second.outputs["tmp_files_open"].values == first.outputs["tmp_files_open"].values


def test_a_finder_an_import_installed_stays_with_its_module(pool):
    """Found: a four-point invrs sweep failed one point on the suite's shared cluster: unyt's
    ``importlib.metadata.version("numpy")`` raised PackageNotFoundError in a warm child. An
    earlier job had imported the ``importlib_metadata`` backport, which removes the standard
    library's distribution finder and puts its own on ``sys.meta_path``; the child put
    ``sys.meta_path`` back, dropping that finder while the module stayed imported."""
    first = run(pool, "import_metadata_backport")
    second = run(pool, "numpy_metadata")
    assert first.status == second.status == "done", (first.error, second.error)
    assert first.outputs["fresh"].values == 1.0  # the child had not imported it before
    assert second.outputs["found"].values == 1.0
    assert second.pid == first.pid


def test_a_metadata_lookup_that_failed_in_one_job_does_not_fail_the_next(pool):
    """Found: a four-point invrs sweep failed one point on the suite's shared cluster: unyt's
    ``importlib.metadata.version("numpy")`` raised PackageNotFoundError in a warm child. A
    folder's listing failed once (at the open-files limit) is kept by importlib.metadata for
    as long as the folder is unchanged, and Python 3.11's ``importlib.invalidate_caches``
    leaves that cache alone."""
    first = run(pool, "numpy_metadata", no_files_left=True)
    second = run(pool, "numpy_metadata")
    assert first.status == second.status == "done", (first.error, second.error)
    assert first.outputs["found"].values == 0.0  # the lookup did fail in the first job
    assert second.outputs["found"].values == 1.0
    assert second.pid == first.pid


# jobs that change what a warm child puts back in place (each keeps its child)
MEDDLERS = [
    ("meddle", {}),
    ("process_state", {}),
    ("import_metadata_backport", {}),
    ("numpy_metadata", {"no_files_left": True}),
]


def test_after_any_job_that_meddles_the_next_sees_the_interpreter_its_child_started_with(pool):
    """The class the defects of the warm child belong to (found: a job's umask, limits and
    affinity; a closed stdout; a finder a new import installed): state one job leaves and
    the next inherits. A job that looks at everything a job may see runs first, then after
    each meddling job in the same child, and sees the same each time."""
    first = run(pool, "interpreter_view")
    for name, kwargs in MEDDLERS:
        ran = run(pool, name, **kwargs)
        assert ran.status == "done", (name, ran.error)
        again = run(pool, "interpreter_view")
        assert again.pid == first.pid, name  # restorable in place: the same child
        seen = {k: v.values for k, v in again.outputs.items()}
        assert seen == {k: v.values for k, v in first.outputs.items()}, name
