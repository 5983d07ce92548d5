"""Sweeps that outlive their terminal: submit --detach, attach, cancel, ls (sweep/client/driver.py).

Real detached processes, real local clusters; `ps` (psutil) checks what is left."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sweep import Sweep, open_results
from tests.helpers import (
    JOBS,
    ROOT,
    alive,
    as_from_a_terminal,
    cli,
    sweep_command,
    sweep_shell,
    wait_for,
    write_recipe,
)


def recipe(tmp_path: Path, name: str, points: int, seconds: float) -> Path:
    folder = tmp_path / f"{name}-marks"
    folder.mkdir()
    return write_recipe(
        tmp_path / f"{name}.yaml",
        name=name,
        job="marked",
        params={"grid": {"x": list(range(points))}, "fixed": {"folder": str(folder), "seconds": seconds}},
        output=tmp_path / "results" / f"{name}.zarr",
    )


def driver_pid(output: Path) -> int:
    import json

    return int(json.loads((output / ".sweep-driver.json").read_text())["pid"])


def children_running(marks: Path) -> list[int]:
    """Child pids that left a start marker and are still alive."""
    pids = {int(p.name.split("-")[2]) for p in marks.iterdir()}
    return [p for p in pids if alive(p)]


@pytest.mark.slow
def test_a_detached_sweep_survives_its_terminal_and_attach_follows_it_to_the_end(tmp_path):
    path = recipe(tmp_path, "bg", points=6, seconds=1.0)
    out = tmp_path / "results" / "bg.zarr"
    # a "terminal": a shell in its own session whose process group gets SIGHUP when it closes
    term = subprocess.Popen(
        ["bash", "-c", f"{sweep_shell()} submit {path} --detach; sleep 60"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )
    assert term.stdout is not None
    printed = ""
    while "sweep cancel" not in printed:  # submit --detach has returned; the shell sleeps on
        line = term.stdout.readline()
        assert line, "submit --detach printed nothing"
        printed += line
    pid = driver_pid(out)
    os.killpg(term.pid, signal.SIGHUP)  # the terminal closes
    term.wait(timeout=30)
    assert f"pid {pid}" in printed and f"sweep attach {out}" in printed and f"sweep cancel {out}" in printed
    assert os.getsid(pid) == pid and psutil.pid_exists(pid)  # its own session: the hangup missed it
    attached = cli("attach", str(out))
    assert attached.returncode == 0, attached.stderr
    assert "[sweep] 6/6" in attached.stderr
    ds = open_results(out)
    assert (ds["status"] == "done").all() and ds.attrs["sweep_run_state"] == "finished"
    # the driver's log reads like a foreground run's: rate lines and the closing table
    log = (out / ".sweep-driver.log").read_text()
    assert "points/s" in log and "[sweep] 6/6" in log and "points done" in log, log
    import json

    state = json.loads((out / ".sweep-driver.json").read_text())
    assert state["exit_code"] == 0 and state["running"] == []  # final once the run ended


@pytest.mark.slow
def test_cancel_stops_a_detached_sweep_kills_its_children_and_a_rerun_resumes(tmp_path):
    path = recipe(tmp_path, "long", points=8, seconds=4.0)
    out, marks = tmp_path / "results" / "long.zarr", tmp_path / "long-marks"
    started = cli("submit", str(path), "--detach")
    assert started.returncode == 0, started.stderr
    wait_for(lambda: len(list(marks.iterdir())) >= 2)  # two points running
    seen = []

    def both_running() -> bool:
        """The status that shows both points running (told every SWEEP_REFRESH_S) is the one
        read: a second call may come as one of them ends, before its record is written."""
        seen.append(cli("status", str(out)))
        return "running  2" in seen[-1].stdout

    wait_for(both_running, seconds=30)
    status = seen[-1]
    assert "running now" in status.stdout, status.stdout
    said = {k: int(n) for k, n in re.findall(r"^  (done|pending|running) +(\d+)$", status.stdout, re.M)}
    assert said.get("done", 0) + said["pending"] == 6, status.stdout  # 8 points: 2 running, the rest apart
    assert status.stdout.count(" cores ") == 2 and " for " in status.stdout
    listed = cli("ls", str(tmp_path / "results"))
    assert listed.returncode == 0 and "long" in listed.stdout and "running now" in listed.stdout, (
        listed.stdout
    )
    t0 = time.monotonic()
    cancelled = cli("cancel", str(out))
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled" in cancelled.stdout and time.monotonic() - t0 < 60
    time.sleep(1)
    assert not children_running(marks)
    ds = open_results(out)
    assert ds.attrs["sweep_run_state"] == "cancelled" and not (ds["status"] == "done").all()
    rerun = cli("submit", str(path), "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    assert list(open_results(out)["value"].values) == [float(x) for x in range(8)]


@pytest.mark.slow
def test_cancel_and_attach_of_a_store_nothing_runs_say_so(tmp_path):
    path = recipe(tmp_path, "idle", points=1, seconds=0.0)
    assert cli("submit", str(path), "--no-progress").returncode == 0
    out = tmp_path / "results" / "idle.zarr"
    for command in ("cancel", "attach"):
        proc = cli(command, str(out))
        assert proc.returncode == 2 and "no sweep runs" in proc.stderr, proc.stderr
    again = cli("submit", str(path), "--detach")
    assert again.returncode == 0 and "nothing left to run" in again.stdout, again.stdout + again.stderr
    proc = cli("ls", str(tmp_path / "results"))
    assert (
        proc.returncode == 0
        and "idle" in proc.stdout
        and "1/0/1" in proc.stdout
        and "finished" in proc.stdout
    )


def test_cancelling_a_sweep_on_your_own_client_kills_its_running_children(client, tmp_path):
    """`SweepRun.cancel()` used `client.cancel`, which leaves a running task and its child be."""
    marks = tmp_path / "marks"
    marks.mkdir()
    s = Sweep(f"{JOBS}:marked", {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"folder": str(marks), "seconds": 60}},
              output=tmp_path / "own.zarr")  # fmt: skip
    run = s.start(client=client, progress=False)
    wait_for(lambda: len(list(marks.iterdir())) >= 2)
    run.cancel()
    wait_for(lambda: not children_running(marks), seconds=30)
    assert not (open_results(tmp_path / "own.zarr")["status"] == "done").any()


@pytest.mark.slow
def test_cancel_in_a_runs_first_seconds_stops_that_run_and_never_signals_a_stale_pid(tmp_path):
    """Found: a finished run leaves its state file, and the next run replaced it only once its
    cluster was up; a cancel in between SIGTERMed the old pid (dead, or reused by another
    process) and said "cancelled" while nothing was."""
    from sweep.client.driver import STATE_NAME, DriverState

    path = recipe(tmp_path, "again", points=6, seconds=3.0)
    out = tmp_path / "results" / "again.zarr"
    assert cli("submit", str(path), "--no-progress", "--set", "params.fixed.seconds=0").returncode == 0
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        # the state file left behind names a pid now used by an unrelated process of this user
        old = DriverState.load(out)
        assert old is not None
        DriverState(bystander.pid, old.host, old.started, old.command).save(out)
        run = subprocess.Popen(
            sweep_command("submit", str(path), "--no-progress", "--force"),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        while True:  # as soon as the new run holds the store: cancel it
            cancelled = cli("cancel", str(out))
            if cancelled.returncode == 0 or run.poll() is not None:
                break
            # only before the new run holds the store: once it does, the cancel waits for its state
            assert "no sweep runs" in cancelled.stderr, cancelled.stderr
            assert bystander.poll() is None
        assert cancelled.returncode == 0, cancelled.stderr
        assert f"pid {run.pid}" in cancelled.stdout, cancelled.stdout
        run.wait(120)
        assert bystander.poll() is None  # never signalled
        assert open_results(out).attrs["sweep_run_state"] == "cancelled"
        assert DriverState.load(out).pid == run.pid and (out / STATE_NAME).exists()
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.slow
def test_a_starting_run_is_not_reported_with_a_previous_runs_points(tmp_path):
    """`status` and `logs --follow` read the state file only when it names the lock holder."""
    from sweep.client.driver import DriverState, Starting, running
    from sweep.store.lock import StoreLock

    path = recipe(tmp_path, "held", points=1, seconds=0.0)
    out = tmp_path / "results" / "held.zarr"
    assert cli("submit", str(path), "--no-progress").returncode == 0
    old = DriverState.load(out)
    old.running = [{"index": [0], "host": "h", "cores": [0], "since": time.time()}]
    old.save(out)
    lock = StoreLock(out)  # a run from Python holds it: it publishes no state
    try:
        try:
            running(out)
            raise AssertionError("a stale state file was taken for the holder's")
        except Starting as exc:
            assert f"pid {os.getpid()}" in str(exc)
        status = cli("status", str(out))
        assert status.returncode == 0 and ": on h cores" not in status.stdout, status.stdout
    finally:
        lock.release()


@pytest.mark.slow
def test_a_cancel_as_a_detached_submit_starts_stops_it_and_nothing_runs(tmp_path):
    """Found: `sweep cancel` in the first second after `submit --detach` said "no sweep runs"
    (exit 2) and the run then finished all its points."""
    from tests.helpers import sweep_command

    path = recipe(tmp_path, "early", points=2, seconds=30.0)
    out, marks = tmp_path / "results" / "early.zarr", tmp_path / "early-marks"
    submitting = subprocess.Popen(
        sweep_command("submit", str(path), "--detach"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: (out / ".sweep-starting").exists() or submitting.poll() is not None)
    cancelled = cli("cancel", str(out))
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout, cancelled.stderr
    _, err = submitting.communicate(timeout=120)
    assert submitting.returncode == 0 or "cancelled as it started" in err, err
    assert not children_running(marks)
    status = cli("status", str(out))
    assert "running now" not in status.stdout and "done  " not in status.stdout, status.stdout


def test_an_attached_progress_line_shows_running_failed_and_an_eta():
    """Found: `sweep attach` showed only done/pending, with no running, failed, rate or ETA."""
    from collections import Counter

    from sweep.client.driver import Rate, _progress

    line = _progress(Counter(done=5, failed=1, pending=6), running_now=2, rate=Rate(time.monotonic() - 10, 0))
    assert line.startswith("[sweep] 5/12  done 5  failed 1  pending 4  running 2  (0.50 points/s, ETA 1"), (
        line
    )
