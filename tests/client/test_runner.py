"""End to end through the CLI and the API: interruption, resume, lock, failures, callables."""

import csv
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import xarray as xr

from sweep import Sweep, open_results
from sweep.cli.app import main
from tests.helpers import JOBS, ROOT, cli, cli_submit, sweep_command, write_recipe

OUTPUTS = ["y", "vec", "curve"]


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def resumable_recipe(tmp_path: Path, seconds: float = 0.0, **extra) -> Path:
    return write_recipe(
        tmp_path / "recipe.yaml",
        **{
            "name": "resumable",
            "job": "square",
            "params": {
                "grid": {"x": [1.0, 2.0, 3.0, 4.0], "offset": [0.0, 10.0]},
                "fixed": {"seconds": seconds},
            },
            "output": tmp_path / "out.zarr",
            "cluster": {},
            **extra,
        },
    )


def sweep_cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        sweep_command(*args),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def done_count(path: Path) -> int:
    try:
        return int((open_results(path)["status"] == "done").sum())
    except (FileNotFoundError, KeyError, ValueError):
        return 0


@pytest.mark.slow
def test_killed_submit_resumes_running_only_the_rest_and_matches_an_uninterrupted_run(
    client, tmp_path, capsys
):
    # points long enough that the second submit below (an interpreter's start) meets the run
    recipe = resumable_recipe(tmp_path, seconds=2.5)
    out = tmp_path / "out.zarr"
    proc = sweep_cli("submit", str(recipe), "--no-progress", start_new_session=True)
    deadline = time.monotonic() + 120
    while done_count(out) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.1)

    # a second submit on the same output refuses at once, naming the first
    second = cli_submit(recipe, timeout=60)
    assert second.returncode == 2
    assert f"pid {proc.pid}" in second.stderr and ".sweep.lock" in second.stderr

    tree = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _, alive = psutil.wait_procs(tree, timeout=15)
    assert not alive, f"orphans left behind: {[p.pid for p in alive]}"

    before = open_results(out)
    done_before = before["status"].values == "done"
    assert 2 <= done_before.sum() < 8
    assert main(["status", str(out)]) == 1
    said = capsys.readouterr().out
    assert f"done     {done_before.sum()}" in said
    assert f"pid {proc.pid}" in said and "ended abnormally" in said
    rerun_at = np.datetime64(time.time_ns(), "ns")
    after = Sweep.from_yaml(recipe).run(client=client, progress=False)
    assert (after["status"] == "done").all()
    rerun = after["started"].values > rerun_at
    assert not (rerun & done_before).any(), "a point done before the kill ran again"
    assert rerun.sum() == (~done_before).sum()
    np.testing.assert_array_equal(after["started"].values[done_before], before["started"].values[done_before])

    reference = Sweep.from_yaml(recipe, output=str(tmp_path / "ref.zarr")).run(client=client, progress=False)
    xr.testing.assert_equal(after[OUTPUTS], reference[OUTPUTS])


@pytest.mark.slow
def test_cli_submit_status_results_on_a_finished_sweep(tmp_path, capsys):
    recipe = resumable_recipe(tmp_path, name="cli")
    out = tmp_path / "out.zarr"
    assert main(["submit", str(recipe), "--no-progress", "--set", "cluster.dashboard=127.0.0.1:0"]) == 0
    assert main(["status", str(out)]) == 0
    assert "done     8" in capsys.readouterr().out
    assert main(["results", str(out)]) == 0
    summary = capsys.readouterr().out.split("<xarray.Dataset>")[0]
    assert "wall s, last run" in summary and "nan" not in summary, summary
    assert main(["results", str(out), "--export", str(tmp_path / "t.csv")]) == 0
    # quiet: one line, naming the array outputs a table can't hold
    columns = len(next(csv.reader(lines_of(tmp_path / "t.csv")))) - 2  # less the two dims
    assert capsys.readouterr().out.splitlines() == [
        f"wrote {tmp_path / 't.csv'}: 8 points, {columns} columns; "
        "left out curve, vec (outputs with dims of their own: export .nc for them)"
    ]
    lines = lines_of(tmp_path / "t.csv")
    assert lines[0].startswith("x,offset,") and len(lines) == 9
    row = next(csv.DictReader(lines))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00", row["started"]), row["started"]
    assert main(["results", str(out), "--export", str(tmp_path / "t.nc")]) == 0
    assert xr.open_dataset(tmp_path / "t.nc")["y"].shape == (4, 2)
    # nothing left to do: a rerun is a no-op that still exits 0
    assert main(["submit", str(recipe), "--no-progress"]) == 0


@pytest.mark.slow
def test_a_changed_space_is_refused_unless_forced(tmp_path, capsys):
    recipe = resumable_recipe(tmp_path, name="changing")
    quiet = ["--no-progress", "--set", "cluster.dashboard=127.0.0.1:0"]
    assert main(["submit", str(recipe), *quiet]) == 0
    capsys.readouterr()
    changed = ["--set", "params.grid.x=[1.0, 5.0]"]
    assert main(["submit", str(recipe), *quiet, *changed]) == 2
    err = capsys.readouterr().err
    assert "leaves out 6 point(s) that already ran" in err and "--force" in err
    assert open_results(tmp_path / "out.zarr")["y"].shape == (4, 2)  # untouched
    assert main(["submit", str(recipe), *quiet, *changed, "--force"]) == 0
    assert open_results(tmp_path / "out.zarr")["y"].shape == (2, 2)


def test_failed_points_are_recorded_retried_and_exit_1(client, tmp_path, capsys):
    s = Sweep(
        f"{JOBS}:fail_if",
        {"grid": {"x": [0, 1, 2]}},
        resources={"retries": 2},
        output=tmp_path / "f.zarr",
    )
    ds = s.run(client=client, progress=False)
    assert list(ds["status"].values) == ["done", "failed", "done"]
    assert list(ds["attempts"].values) == [1, 3, 1]
    assert "ValueError: x=1 is bad" in ds["error"].values[1]
    assert main(["status", str(tmp_path / "f.zarr")]) == 1
    assert "failed" in capsys.readouterr().out


def test_a_notebook_callable_is_sent_by_value(client, tmp_path):
    scale = 3.0

    def local_job(a):
        return {"b": a * scale}

    ds = Sweep(local_job, {"list": [{"a": 1.0}, {"a": 2.0}]}, output=tmp_path / "c.zarr").run(
        client=client, progress=False
    )
    assert list(ds["b"].values) == [3.0, 6.0]


@pytest.mark.slow
def test_a_sweep_of_many_points_comes_back_lazy_and_a_small_one_loaded(client, tmp_path, monkeypatch):
    """Past LOADED_POINTS the dataset run() and a background run's results() return is read
    from the store as it is used; the report history reads it as it reads a loaded one."""
    from sweep import report_history
    from sweep.client import execution

    monkeypatch.setattr(execution, "LOADED_POINTS", 2)
    fixed = {"steps": 2, "seconds": 0.0}
    big = Sweep(
        f"{JOBS}:reporting", {"grid": {"x": [1.0, 2.0, 3.0]}, "fixed": fixed}, output=tmp_path / "b.zarr"
    )
    run = big.start(client=client, progress=False)
    ds = run.wait(120)
    assert ds["status"].chunks is not None and run.results()["status"].chunks is not None
    assert list(ds["status"].values) == ["done"] * 3
    history = report_history(ds)
    assert len(history) == 6 and sorted(set(history["x"])) == [1.0, 2.0, 3.0]
    assert set(history["point_id"]) == set(ds["point_id"].values)
    small = Sweep(f"{JOBS}:square", {"grid": {"x": [1.0, 2.0]}}, output=tmp_path / "s.zarr")
    ds = small.run(client=client, progress=False)
    assert ds["y"].chunks is None and list(ds["y"].values) == [1.0, 4.0]


@pytest.mark.slow
def test_a_new_store_opens_while_the_local_cluster_starts(tmp_path, monkeypatch):
    """A new store on the local default is created in a thread of its own while the cluster
    starts in the caller's; a store with nothing left to do opens in the caller's thread and
    starts no cluster at all."""
    import threading

    from sweep.store import Store

    opened_in: list[str] = []
    real_open = Store.open

    def spied_open(*args, **kwargs):
        opened_in.append(threading.current_thread().name)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(Store, "open", spied_open)
    params = {"grid": {"x": [1.0, 2.0]}}
    s = Sweep(f"{JOBS}:square", params, output=tmp_path / "o.zarr", cluster={"dashboard": "127.0.0.1:0"})
    ds = s.run(progress=False)
    assert list(ds["y"].values) == [1.0, 4.0]
    assert opened_in[0].startswith("sweep-store")
    assert max(s.timeline["store"], s.timeline["cluster"]) <= s.timeline["first_submit"]
    s.run(progress=False)  # all done: the store opens first, and no cluster is started
    assert opened_in[1] == threading.main_thread().name and "cluster" not in s.timeline


def test_a_store_that_cannot_be_opened_beside_the_cluster_closes_the_cluster(tmp_path, monkeypatch):
    """The store's error is raised once the cluster it was opened beside has been closed: no
    local worker is left, and no store thread. (The disk fills while the skeleton is written:
    tests/client/test_faults.py does it with a real full disk, as root.)"""
    import errno
    import threading

    import sweep.store.creation
    from sweep.store import StoreFull

    def full(*args):
        time.sleep(0.5)  # the cluster is starting meanwhile
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sweep.store.creation, "_build", full)
    s = Sweep(
        f"{JOBS}:square",
        {"grid": {"x": [1.0]}},
        output=tmp_path / "o.zarr",
        cluster={"dashboard": "127.0.0.1:0"},
    )

    def local_workers() -> set[int]:  # the session's cluster (fixture `client`) may have one
        me = psutil.Process()
        return {
            c.pid for c in me.children(recursive=True) if "sweep.cluster.localworker" in " ".join(c.cmdline())
        }

    before = local_workers()
    with pytest.raises(StoreFull, match="nothing ran"):
        s.run(progress=False)
    assert local_workers() == before
    assert not [t for t in threading.enumerate() if t.name.startswith("sweep-store")]
    assert "cluster" in s.timeline  # it had started


@pytest.mark.slow
def test_a_rerun_of_a_finished_sweep_says_there_is_nothing_to_run(tmp_path):
    """Found: a second `make run` on a finished store said nothing like "nothing to run"."""
    recipe = resumable_recipe(tmp_path, name="again")
    assert cli("submit", str(recipe), "--set", "cluster.dashboard=127.0.0.1:0").returncode == 0
    again = cli("submit", str(recipe), "--set", "cluster.dashboard=127.0.0.1:0")
    assert again.returncode == 0, again.stderr
    assert "nothing to run, 8 of 8 points already ended" in again.stderr, again.stderr
    assert "points run now" in again.stdout + again.stderr
