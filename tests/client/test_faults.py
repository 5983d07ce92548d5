"""Faults injected for real: each one fails its point only, and the sweep and worker go on."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import yaml

from sweep import Sweep, open_results
from sweep.errors import SweepWarning
from tests.helpers import (
    JOBS,
    ROOT,
    alive,
    as_from_a_terminal,
    cli,
    cli_submit,
    kill_the_worker_mid_sweep,
    sweep_command,
    wait_for,
)


def worker_pids(client) -> set[int]:
    return set(client.run(os.getpid).values())


def run(client, tmp_path, name, params, **kw):
    return Sweep(f"{JOBS}:{name}", params, output=tmp_path / f"{name}.zarr", **kw).run(
        client=client, progress=False
    )


@pytest.mark.slow
@pytest.mark.parametrize(("how", "signal_name"), [("abort", "SIGABRT"), ("segv", "SIGSEGV")])
def test_child_killed_by_a_signal_fails_its_point_and_the_worker_survives(client, tmp_path, how, signal_name):
    before = worker_pids(client)
    ds = run(client, tmp_path, "crash", {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"how": how}})
    assert list(ds["status"].values) == ["done", "failed", "done", "done"]
    error = ds["error"].values[1]
    assert ds["signal"].values[1] == signal_name and signal_name in error
    assert f"crashing by {how}" in ds["output_tail"].values[1] and "crashing" not in error
    assert worker_pids(client) == before
    dead = ds["pid"].values[1]
    assert dead not in set(ds["pid"].values[[2, 3]])  # later points got a fresh child
    assert not alive(dead)


@pytest.mark.slow
def test_timeout_kills_the_child_and_returns_the_lease(client, tmp_path):
    ds = run(
        client, tmp_path, "sleepy", {"grid": {"x": [0, 1, 2]}}, resources={"timeout": "1s", "retries": 1}
    )
    assert list(ds["status"].values) == ["done", "timeout", "done"]
    assert "timed out after 1 s (resources.timeout)" in ds["error"].values[1]
    assert ds["attempts"].values[1] == 2
    assert 1.0 <= ds["wall_s"].values[1] < 10


def test_memory_limit_kills_the_child_and_says_so(client, tmp_path):
    before = worker_pids(client)
    ds = run(client, tmp_path, "hog", {"grid": {"x": [0, 1, 2]}}, resources={"memory": "400MiB"})
    assert list(ds["status"].values) == ["done", "oom", "done"]
    assert "memory limit exceeded" in ds["error"].values[1] and "> 400 MiB" in ds["error"].values[1]
    assert worker_pids(client) == before


@pytest.mark.slow
def test_thread_overflow_is_reported_and_killed_when_asked(client, tmp_path):
    params = {"grid": {"x": [0]}, "fixed": {"n": 40}}
    warn = run(client, tmp_path, "many_threads", params)
    assert warn["status"].item() == "done"
    assert warn["peak_threads"].item() > warn["thread_budget"].item() == 17
    fail = Sweep(
        f"{JOBS}:many_threads",
        params,
        resources={"on_thread_overflow": "fail"},
        output=tmp_path / "fail.zarr",
    ).run(client=client, progress=False)
    assert fail["status"].item() == "killed"
    assert "thread budget exceeded" in fail["error"].item()


def test_unsupported_output_fails_that_point_only(client, tmp_path):
    ds = run(client, tmp_path, "bad_output", {"grid": {"x": [0, 1, 2]}})
    assert list(ds["status"].values) == ["done", "failed", "done"]
    assert "output 'value'" in ds["error"].values[1]


@pytest.mark.slow
def test_worker_killed_mid_job_is_rescheduled_without_orphans_or_double_records(tmp_path):
    import logging

    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            resources={"threads": 2},
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        ds, victims, markers = kill_the_worker_mid_sweep(client, tmp_path)
    assert (ds["status"] == "done").all()
    starts = sorted(os.listdir(markers))
    assert len(starts) > 4  # the killed point(s) started again on the new worker
    killed = {int(name.split("-")[1]) for name in starts if int(name.split("-")[2]) in victims}
    for x in killed:
        assert ds["pid"].values[x] not in victims  # recorded once, from the rerun
    assert list(ds["value"].values) == [0.0, 1.0, 2.0, 3.0]


WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from sweep.model.recipe import Recipe
    from sweep.store import Store
    from sweep.wire.protocol import Output
    from sweep.wire.protocol import PointRecord
    out, jobs = sys.argv[1], sys.argv[2]
    space = {"zip": {"x": list(map(float, range(400)))}}
    loaded = Recipe.from_dict({"job": jobs + ":square", "params": space, "output": out})
    rng = np.random.default_rng()
    with Store.open(out, loaded) as store:
        for i in sorted(store.todo()):
            big = rng.random(200_000)  # incompressible, so a write takes a while
            big[0] = i[0]
            outputs = {"big": Output(big, ("k",)), "y": Output(np.array(1.0), ())}
            store.write([PointRecord(i, status="done", outputs=outputs, wall_s=1.0)])
    """
)


def _done(out: Path) -> int:
    try:
        return int((open_results(out)["status"] == "done").sum())
    except (OSError, KeyError, ValueError):  # a store still being made
        return 0


@pytest.mark.slow
def test_a_writer_killed_mid_write_never_leaves_a_done_point_with_partial_data(tmp_path):
    out = tmp_path / "torn.zarr"
    rng = np.random.default_rng(0)
    counts = []
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(JOBS)], cwd=ROOT)
        deadline = time.monotonic() + 60  # the first writer creates the store (imports and all)
        before = counts[-1] if counts else 0
        while not (out / "zarr.json").exists() or _done(out) <= before:  # it writes: kill it mid-way
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        time.sleep(rng.random())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ds = open_results(out)
        done = ds["status"].values == "done"
        counts.append(int(done.sum()))
        if "big" in ds:
            big = ds["big"].values[done]
            assert not np.isnan(big).any(), "a point reads done with missing data"
            assert (big[:, 0] == ds["x"].values[done]).all()
            assert (ds["wall_s"].values[done] == 1.0).all()
    # every kill landed mid-sweep: progress each time, never the end
    assert counts[0] > 0 and all(a < b for a, b in zip(counts, counts[1:])) and counts[-1] < 400, counts


def root_only(reason: str):
    return pytest.mark.skipif(os.geteuid() != 0, reason=f"{reason} needs root")


@pytest.fixture
def mounted(tmp_path):
    """Mount points made for one test and unmounted after it."""
    mounts = []

    def mount(*args: str) -> None:
        subprocess.run(["mount", *args], check=True, capture_output=True)
        mounts.append(args[-1])

    yield mount
    for target in reversed(mounts):
        subprocess.run(["umount", "-l", target], check=False, capture_output=True)


def tmpfs(tmp_path, mounted, size: str) -> Path:
    """A folder on a tmpfs of ``size`` mounted for this test."""
    disk = tmp_path / f"disk-{size}"
    disk.mkdir()
    mounted("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk))
    return disk


def big_recipe(tmp_path, output, points=16, size=50_000):
    recipe = tmp_path / "big.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "name": "big",
                "job": f"{JOBS}:incompressible",
                "params": {"grid": {"x": list(range(points))}, "fixed": {"size": size}},
                "cluster": {"dashboard": "127.0.0.1:0"},
                "output": str(output),
            }
        )
    )
    return recipe


@pytest.mark.slow
@root_only("mounting a tmpfs")
def test_a_full_disk_is_one_line_exit_3_and_keeps_what_was_written(tmp_path, mounted):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted("-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk))
    out = disk / "out.zarr"
    recipe = big_recipe(tmp_path, out)  # 16 points x 400 kB of random floats, written in batches
    recipe.write_text(recipe.read_text().replace("incompressible", "slow_incompressible"))
    run = cli_submit(recipe)
    assert run.returncode == 3, run.stderr
    line = run.stderr.strip().splitlines()[-1]
    assert "Traceback" not in run.stderr, run.stderr
    assert line.startswith(f"sweep submit: error: cannot write {out}: No space left on device; ")
    assert line.endswith("points saved; submit again after freeing space")
    saved = int(line.split("; ")[1].split()[0])
    assert 0 < saved < 16 and int((open_results(out)["status"] == "done").sum()) == saved
    # room again (a bigger disk): the rerun completes the sweep
    subprocess.run(["mount", "-o", "remount,size=16m", str(disk)], check=True)
    assert cli_submit(recipe).returncode == 0
    assert (open_results(out)["status"] == "done").all()


@pytest.mark.slow
@root_only("mounting a tmpfs")
def test_a_store_that_cannot_be_created_leaves_nothing_behind(tmp_path, mounted):
    disk = tmp_path / "tiny"
    disk.mkdir()
    mounted("-t", "tmpfs", "-o", "size=12k", "tmpfs", str(disk))
    run = cli_submit(big_recipe(tmp_path, disk / "out.zarr"))
    assert run.returncode == 3, run.stderr
    assert "cannot create" in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert not [p.name for p in disk.iterdir() if p.name.startswith(".out.zarr.creating")]


@pytest.mark.slow
@root_only("mounting a tmpfs")
def test_a_detached_run_on_a_full_disk_says_why_exits_3_and_leaves_nothing(tmp_path, mounted):
    """Found: --detach said "ended at once (exit code 1)", exited 2, and left a folder of only
    the lock and the log, which `status` then called "not a sweep result store"."""
    disk = tmp_path / "tiny"
    disk.mkdir()
    mounted("-t", "tmpfs", "-o", "size=12k", "tmpfs", str(disk))
    run = cli_submit(big_recipe(tmp_path, disk / "out.zarr"), "--detach")
    assert run.returncode == 3, run.stderr
    assert "cannot create" in run.stderr and "No space left on device" in run.stderr, run.stderr
    assert list(disk.iterdir()) == []


@pytest.mark.slow
@root_only("a read-only bind mount")
def test_an_unwritable_compile_cache_warns_once_and_the_sweep_runs(client, tmp_path, mounted):
    """Found: with a read-only cache every point failed with `task failed: (<class 'OSError'>...`."""
    cache = tmp_path / "cache"
    cache.mkdir()
    mounted("--bind", str(cache), str(cache))
    subprocess.run(["mount", "-o", "remount,ro,bind", str(cache)], check=True)
    with pytest.warns(SweepWarning, match=rf"{cache}/jax can't be written .*child.compile_cache") as seen:
        ds = Sweep(
            f"{JOBS}:jax_grad",
            {"grid": {"seed": [0, 1]}, "fixed": {"n": 8}},
            child={"compile_cache": str(cache / "jax")},
            output=tmp_path / "out.zarr",
        ).run(client=client, progress=False)
    assert len([w for w in seen if issubclass(w.category, SweepWarning)]) == 1
    assert (ds["status"] == "done").all(), ds["error"].values


@pytest.mark.slow
def test_inherited_xla_device_flags_are_dropped_with_one_warning(client, tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    with pytest.warns(SweepWarning, match="xla_force_host_platform_device_count=8"):
        ds = run(client, tmp_path, "jax_devices", {"grid": {"x": [0]}})
    assert ds["devices"].item() == 1.0 and ds["status"].item() == "done"


@pytest.mark.slow
@pytest.mark.parametrize("after", [0.5, 1.5, "two points"])
def test_ctrl_c_is_one_line_exit_130_and_resumes(tmp_path, after):
    out = tmp_path / "out.zarr"
    recipe = big_recipe(tmp_path, out, points=8, size=10)
    recipe.write_text(recipe.read_text().replace("incompressible", "slow_incompressible"))
    proc = subprocess.Popen(
        sweep_command("submit", str(recipe), "--no-progress"),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    if after != "two points":  # during start-up: imports, the cluster's start
        time.sleep(after)
    else:
        while not (out / "zarr.json").exists() or (open_results(out)["status"] == "done").sum() < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "AssertionError" not in err, err
    assert err.strip().splitlines()[-1].startswith("sweep submit: interrupted"), err
    if after == "two points":
        assert "points saved" in err and "submit again to resume" in err
        assert open_results(out).attrs["sweep_run_state"] == "interrupted"
    assert cli_submit(recipe).returncode == 0
    assert (open_results(out)["status"] == "done").all()


def bootstrap_pids(mark: str) -> set[int]:
    """Children of sweeps run with ``SWEEP_TEST_MARK=mark`` (inherited from the submit): another
    test run's children on the same machine are not this test's."""
    found = set()
    for p in psutil.process_iter(["cmdline"]):
        if "sweep.child.bootstrap" in " ".join(p.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                if p.environ().get("SWEEP_TEST_MARK") == mark:
                    found.add(p.pid)
    return found


@pytest.mark.slow
def test_a_daemon_a_job_starts_in_its_own_session_ends_with_the_job(tmp_path):
    """Found: a job that forked into its own session (fork + setsid + sleep) returned done and
    its process was still alive after `sweep submit` exited."""
    mark = tmp_path.name
    recipe = tmp_path / "daemon.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:leave_daemon",
                "params": {"list": [{"pidfile": str(tmp_path / f"daemon{i}.pid")} for i in range(2)]},
                "cluster": {"dashboard": "127.0.0.1:0"},
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    proc = cli_submit(recipe, env={**os.environ, "SWEEP_TEST_MARK": mark})
    assert proc.returncode == 0, proc.stderr
    pids = [int((tmp_path / f"daemon{i}.pid").read_text()) for i in range(2)]
    assert not [p for p in pids if alive(p)]
    wait_for(lambda: not bootstrap_pids(mark), seconds=10)  # no child of the sweep is left either


@pytest.mark.slow
@root_only("mounting a tmpfs")
def test_a_full_disk_keeps_every_point_that_fits(tmp_path, mounted):
    """Found: on a 20 MB disk with 8 MB outputs, "0 points saved" while two points' chunks
    filled it: the one-by-one retry rewrote chunks already written, which needs room again."""
    out = tmpfs(tmp_path, mounted, "20m") / "out.zarr"
    recipe = big_recipe(tmp_path, out, points=4, size=1_000_000)  # 8 MB each, all in one batch
    run = cli_submit(recipe)
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr and "; 2 points saved;" in run.stderr, run.stderr
    assert int((open_results(out)["status"] == "done").sum()) == 2


@pytest.mark.slow
@root_only("mounting a tmpfs")
def test_a_new_store_on_a_full_disk_is_one_line_exit_3_and_leaves_no_folder(tmp_path, mounted):
    """Found: the lock write failed with a traceback, exit 1, and left an empty folder."""
    disk = tmpfs(tmp_path, mounted, "1m")
    subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'filler'}", "bs=4k"], capture_output=True)
    run = cli_submit(big_recipe(tmp_path, disk / "out.zarr"))
    assert run.returncode == 3, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "cannot create" in run.stderr, run.stderr
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


@pytest.mark.slow
@root_only("mounting a tmpfs")
def test_attach_ends_with_the_exit_code_of_a_sweep_that_filled_its_disk(tmp_path, mounted):
    """Found: `sweep attach` of a driver that exited 3 (disk full) exited 1."""
    out = tmpfs(tmp_path, mounted, "20m") / "out.zarr"
    recipe = big_recipe(tmp_path, out, points=4, size=1_000_000)
    recipe.write_text(recipe.read_text().replace("incompressible", "slow_incompressible"))
    assert cli_submit(recipe, "--detach").returncode == 0
    attach = cli("attach", str(out))
    assert attach.returncode == 3, attach.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", ["moved", "deleted"])
def test_a_store_moved_or_deleted_under_its_sweep_stops_it_and_leaves_nothing_behind(client, tmp_path, how):
    """Found: the driver recreated a phantom store at the old path and lost later points; every
    command on that half-store ended in a traceback, and a new submit failed on it."""
    import shutil

    from sweep.store import StoreGone

    out = tmp_path / "out.zarr"
    s = Sweep(
        f"{JOBS}:square", {"grid": {"x": [float(i) for i in range(8)]}, "fixed": {"seconds": 1.0}}, output=out
    )
    run = s.start(client=client, progress=False)
    deadline = time.monotonic() + 120
    while not (out / "zarr.json").exists() or (open_results(out)["status"] == "done").sum() < 2:
        assert time.monotonic() < deadline and not run.done()
        time.sleep(0.1)
    if how == "moved":
        shutil.move(str(out), str(tmp_path / "elsewhere.zarr"))
    else:
        shutil.rmtree(out)
    with pytest.raises(StoreGone, match="was moved or deleted while the sweep ran"):
        run.wait(120)
    assert not out.exists()  # no phantom store at the old path
    if how == "moved":
        kept = open_results(tmp_path / "elsewhere.zarr")
        assert 2 <= int((kept["status"] == "done").sum()) < 8
        from sweep.store import last_run

        said = last_run(tmp_path / "elsewhere.zarr", kept.attrs)  # not "ended abnormally"
        assert f"stopped when the store was moved from {out.resolve()}" in said, said


@pytest.mark.slow
def test_a_half_store_is_one_line_for_every_command(client, tmp_path, capsys):
    from sweep.cli.app import main

    out = tmp_path / "out.zarr"
    Sweep(f"{JOBS}:square", {"grid": {"x": [1.0]}}, output=out).run(client=client, progress=False)
    (out / "zarr.json").unlink()  # what a store moved away mid-write used to leave
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump({"job": f"{JOBS}:square", "params": {"grid": {"x": [1.0]}}, "output": str(out)})
    )
    for argv in (["status", str(out)], ["submit", str(recipe), "--no-progress"], ["cancel", str(out)]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(out) in err, (argv, err)
    assert main(["submit", str(recipe), "--no-progress", "--force"]) == 0


@pytest.mark.slow
@root_only("mounting a tmpfs")
def test_a_disk_that_fills_as_the_run_ends_is_still_one_line_exit_3(tmp_path, mounted):
    """Found: 40 points of array outputs on a 3 MiB tmpfs gave StoreFull, then the end-of-run
    listener saving what the run learned raised `OSError: [Errno 28]` over it: two tracebacks."""
    disk = tmpfs(tmp_path, mounted, "3m")
    out = disk / "out.zarr"
    run = cli_submit(big_recipe(tmp_path, out, points=40))
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(f"sweep submit: error: cannot write {out}: ")


@pytest.mark.slow
def test_a_file_size_limit_is_one_line_exit_3(tmp_path):
    """Found: `ulimit -f` (EFBIG) on a store write was a traceback, not exit 3."""
    import resource

    out = tmp_path / "out.zarr"

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    run = cli_submit(big_recipe(tmp_path, out, points=8), preexec_fn=limited)
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr and "File too large" in run.stderr, run.stderr


@pytest.mark.slow
@root_only("mounting a tmpfs")
def test_a_detached_run_on_a_disk_with_no_room_for_its_log_says_why(tmp_path, mounted):
    """Found: "the sweep ended at once (exit code 1):" and nothing after the colon."""
    disk = tmpfs(tmp_path, mounted, "64k")
    (disk / "out.zarr").mkdir()
    with contextlib.suppress(OSError), open(disk / "filler", "wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()
    run = cli_submit(big_recipe(tmp_path, disk / "out.zarr"), "--detach")
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert not run.stderr.rstrip().endswith(":") and f"the disk of {disk / 'out.zarr'} is full" in run.stderr
