"""The child process: capping, measurements, limits. Real spawned children, no Dask."""

import os
import sys

import psutil
import pytest

from sweep.model.job import parse_job
from sweep.wire.childconfig import ChildConfig
from sweep.wire.placement import thread_budget
from sweep.wire.task import Limits
from sweep.worker.child import Child
from tests.helpers import ROOT, alive, job

CAPPED = ChildConfig(cap=True)
UNCAPPED = ChildConfig(cap=False)


@pytest.fixture
def child():
    c = Child([0], CAPPED)
    yield c
    c.kill()


def test_capped_environment_sets_every_pool_variable():
    env = CAPPED.environ([0, 1], base={"OMP_NUM_THREADS": "1", "MALLOC_TRIM_THRESHOLD_": "0", "HOME": "/h"})
    assert env["NPROC"] == env["PJRT_NPROC"] == "2"
    one = CAPPED.environ([0], base={})
    assert one["NPROC"] == one["PJRT_NPROC"] == "1"  # one compute thread on one core
    assert one["SWEEP_JAX_CONFIG"] == "jax_cpu_enable_async_dispatch=false"  # host callbacks
    assert CAPPED.environ([0, 1, 2, 3], base={})["PJRT_NPROC"] == "4"
    assert "SWEEP_JAX_CONFIG" not in env  # from 2 cores XLA dispatches as it likes
    assert env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"
    assert env["JAX_PLATFORMS"] == "cpu"
    assert env["HOME"] == "/h"
    assert "MALLOC_TRIM_THRESHOLD_" not in env


def test_uncapped_environment_drops_what_the_nanny_set():
    env = UNCAPPED.environ([0], base={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    assert "OMP_NUM_THREADS" not in env and "OPENBLAS_NUM_THREADS" not in env and "NPROC" not in env


def test_compile_cache_is_passed_to_jax(tmp_path):
    env = ChildConfig(compile_cache=str(tmp_path)).environ([0], base={})
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path)
    assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"


def test_child_is_pinned_to_its_lease_and_sees_capped_env(child):
    out = child.run(parse_job(job("affinity")), {})
    assert out.status == "done", out.error
    assert out.cores == (0,)
    assert out.outputs["ncpus"].values == 1 and out.outputs["cpu_sum"].values == 0
    assert out.outputs["nproc_env"].values == 1 and out.outputs["blas_env"].values == 1


def test_child_is_spawned_not_forked(child):
    # A forked child would share the parent's command line; a spawned one runs the bootstrap.
    assert psutil.Process(child.pid).cmdline()[1:3] == ["-m", "sweep.child.bootstrap"]
    assert psutil.Process(child.pid).ppid() == os.getpid()


@pytest.mark.slow
def test_cap_bounds_jax_threads_and_uncapped_holds_more():
    peaks = {}
    for name, config in (("capped", CAPPED), ("uncapped", UNCAPPED)):
        c = Child([0], config)
        try:
            out = c.run(parse_job(job("jax_grad")), {"n": 64})
        finally:
            c.kill()
        assert out.status == "done", out.error
        peaks[name] = out.peak_threads
    assert peaks["capped"] <= thread_budget(1) == 17
    if len(os.sched_getaffinity(0)) > 1:
        assert peaks["uncapped"] > peaks["capped"], peaks


@pytest.mark.slow
def test_warm_child_serves_a_second_job_without_reimporting_jax(child):
    first = child.run(parse_job(job("jax_grad")), {"n": 32})
    second = child.run(parse_job(job("jax_grad")), {"n": 32, "seed": 1})
    assert first.status == second.status == "done"
    assert first.outputs["jax_was_loaded"].values == 0
    assert second.outputs["jax_was_loaded"].values == 1
    assert first.pid == second.pid
    assert second.wall_s < first.wall_s  # the first one paid for `import jax`


def test_job_exception_is_a_failed_outcome_and_the_child_survives(child):
    out = child.run(parse_job(job("fail_if")), {"x": 1})
    assert out.status == "failed"
    assert "ValueError: x=1 is bad" in out.error and "Traceback" in out.error
    assert child.alive()
    assert child.run(parse_job(job("fail_if")), {"x": 2}).status == "done"


def test_a_failed_jobs_output_is_kept(child):
    """Found under `ulimit -u`: the cause (OpenBLAS: pthread_create failed) was only printed,
    the error said `numpy._core.multiarray failed to import`."""
    out = child.run(parse_job(job("crash")), {"x": 1, "how": "raise"})
    assert out.status == "failed" and "crashed by raising" in out.error
    assert "crashing by raise" in out.output_tail


def test_job_stdout_does_not_break_the_protocol(tmp_path, child):
    f = tmp_path / "loud.py"
    f.write_text(
        "import sys\ndef loud():\n    print('x' * 100000)\n    sys.stdout.flush()\n    return {'a': 1}\n"
    )
    out = child.run(parse_job(f"{f}:loud"), {})
    assert out.status == "done" and out.outputs["a"].values == 1


def test_child_killed_by_a_signal_reports_it_with_its_output(tmp_path, child):
    f = tmp_path / "crash.py"
    f.write_text(
        "import os, sys\ndef crash():\n    print('about to abort', file=sys.stderr)\n    os.abort()\n"
    )
    out = child.run(parse_job(f"{f}:crash"), {})
    assert out.status == "failed"
    assert out.signal == "SIGABRT" and "SIGABRT" in out.error and "about to abort" in out.output_tail
    assert not child.alive()


@pytest.mark.slow
def test_timeout_kills_the_whole_tree(tmp_path, child):
    f = tmp_path / "slow.py"
    pidfile = tmp_path / "grandchild.pid"
    f.write_text(
        "import subprocess, time\n"
        "def slow(pidfile):\n"
        "    p = subprocess.Popen(['sleep', '60'])\n"
        "    open(pidfile, 'w').write(str(p.pid))\n"
        "    time.sleep(60)\n"
    )
    out = child.run(parse_job(f"{f}:slow"), {"pidfile": str(pidfile)}, limits=Limits(timeout=1.0))
    assert out.status == "timeout" and "1 s" in out.error
    assert not child.alive()
    grandchild = int(pidfile.read_text())
    gone = not alive(grandchild)
    assert gone, "the job's own subprocess survived the timeout"


def test_memory_limit_kills_the_child(tmp_path, child):
    f = tmp_path / "hog.py"
    f.write_text(
        "import time\n"
        "def hog():\n"
        "    blocks = []\n"
        "    while True:\n"
        "        blocks.append(bytearray(50 * 2**20))\n"
        "        time.sleep(0.02)\n"
    )
    out = child.run(parse_job(f"{f}:hog"), {}, limits=Limits(memory=300 * 2**20))
    assert out.status == "oom" and "memory limit" in out.error
    assert not child.alive()


BLOCKER = """
import importlib.abc, pkgutil, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "jax", "jaxlib", "pydantic", "psutil", "distributed", "scipy"):
            raise ImportError(f"{name} imported by the child's code before pinning")
sys.meta_path.insert(0, Block())
import sweep.child
names = [m.name for m in pkgutil.iter_modules(sweep.child.__path__, "sweep.child.")]
for name in names + ["sweep", "sweep.wire.protocol", "sweep.model.job", "sweep.errors"]:
    __import__(name)
print(sorted(names))
"""


def test_every_module_of_the_child_package_imports_with_third_party_libraries_blocked():
    """The child pins itself before numpy/BLAS/JAX load: what it imports above that point,
    the whole ``sweep.child`` package, must be standard library only."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "sweep.child.bootstrap" in out.stdout and "sweep.child.serving" in out.stdout


def test_a_job_returning_python_numbers_never_loads_numpy_in_the_child(child):
    ref = parse_job(job("modules_loaded"))
    assert child.run(ref, {}).status == "done"
    again = child.run(ref, {})  # reports what the first job's result handling imported
    assert again.outputs["numpy"].values == 0.0 and again.outputs["jax"].values == 0.0


def test_inherited_flags_that_multiply_xla_devices_are_stripped():
    base = {
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8 --xla_dump_to=/tmp/d",
        "JAX_NUM_CPU_DEVICES": "4",
    }
    env = CAPPED.environ([0], base=base)
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/d" and "JAX_NUM_CPU_DEVICES" not in env
    wanted = ChildConfig(env=(("XLA_FLAGS", "--xla_force_host_platform_device_count=2"),))
    assert wanted.environ([0], base=base)["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"


@pytest.mark.slow
def test_a_child_keeps_one_device_when_the_users_shell_asks_for_eight(monkeypatch):
    """Found: with XLA_FLAGS=--xla_force_host_platform_device_count=8 in the shell a capped child
    had 8 devices and 25-27 threads against a budget of 15."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    c = Child([0], CAPPED)
    try:
        out = c.run(parse_job(job("jax_devices")), {})
    finally:
        c.kill()
    assert out.status == "done", out.error
    assert out.outputs["devices"].values == 1.0 and out.peak_threads <= thread_budget(1)


def test_a_short_job_over_its_thread_budget_is_killed_under_fail(child):
    """Found: jobs shorter than the watch's sampling interval escaped `on_thread_overflow: fail`."""
    out = child.run(parse_job(job("leave_threads")), {"n": 20}, limits=Limits(max_threads=15))
    assert out.status == "killed" and "thread budget exceeded" in out.error
    assert out.peak_threads > 15 and not child.alive()


def test_capped_environment_switches_off_bundled_allocator_threads():
    assert CAPPED.environ([0], base={})["JE_ARROW_MALLOC_CONF"] == "background_thread:false"
    mine = CAPPED.environ([0], base={"JE_ARROW_MALLOC_CONF": "narenas:1"})
    assert mine["JE_ARROW_MALLOC_CONF"] == "narenas:1"  # a user's own setting is kept


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("recipe", ["quickstart.yaml", "ceviche_sweep.yaml"])
def test_shipped_recipes_hold_their_thread_budget_on_a_cold_compile_cache(tmp_path, recipe, k):
    """A newcomer's first run: nothing compiled yet, so XLA's compile pools and the allocator
    threads of what the job imports (xarray -> pandas -> pyarrow) all appear at once."""
    from sweep.client import plan
    from sweep.model.recipe import Recipe

    loaded = Recipe.load(ROOT / "recipes" / recipe, overrides=[f"resources.threads={k}"])
    point = next(iter(loaded.space.points()))
    kwargs = {**point.params, **loaded.recipe.params.fixed, "steps": 2}
    c = Child(list(range(k)), ChildConfig(compile_cache=str(tmp_path / "cold")))
    try:
        out = c.run(loaded.job, kwargs, limits=Limits(timeout=600))
    finally:
        c.kill()
    assert out.status == "done", out.error
    allowed = plan.budget(loaded.recipe, k)
    assert out.peak_threads <= allowed, (out.peak_threads, allowed)


def test_log_files_of_a_killed_workers_children_are_removed_and_live_ones_kept(tmp_path):
    """Found: ``$TMPDIR/sweep-child-*.log`` of workers killed with SIGKILL stayed for ever."""
    import subprocess

    from sweep.worker.childlog import LOG_PREFIX, remove_orphan_logs

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = tmp_path / f"{LOG_PREFIX}{gone.pid}-abc.log"
    alive = tmp_path / f"{LOG_PREFIX}{os.getpid()}-def.log"
    orphan.write_text("x")
    alive.write_text("y")
    assert remove_orphan_logs(str(tmp_path)) == 1
    assert not orphan.exists() and alive.exists()


def test_a_childs_log_file_names_its_parent(child):
    from sweep.worker.childlog import LOG_PREFIX

    assert os.path.basename(child.log.path).startswith(f"{LOG_PREFIX}{os.getpid()}-")
