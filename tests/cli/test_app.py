"""The ``sweep`` command as a process: what it does with its streams and signals."""

import re
import subprocess

import pytest
import yaml

from sweep import Sweep, open_results
from sweep.cli.app import main
from tests.helpers import JOBS, ROOT, cli, sweep_shell, write_recipe


def local_recipe(tmp_path, seconds: float = 0.5):
    recipe = write_recipe(
        tmp_path / "recipe.yaml",
        name="piped",
        job="square",
        params={"grid": {"x": [1.0, 2.0, 3.0, 4.0]}, "fixed": {"seconds": seconds}},
        resources={"threads": 1},
        cluster={"kind": "local", "dashboard": "127.0.0.1:0"},
        output=tmp_path / "out.zarr",
    )
    return recipe, tmp_path / "out.zarr"


@pytest.mark.slow
def test_submit_piped_into_head_finishes_the_sweep(tmp_path):
    """`sweep submit ... | head -n 1`: head exits after the first line; the sweep goes on."""
    recipe, out = local_recipe(tmp_path)
    cmd = f"{sweep_shell()} submit {recipe} 2>&1 | head -n 1; echo rc=${{PIPESTATUS[0]}}"
    run = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.stdout.strip().splitlines()[-1] == "rc=0", run.stdout + run.stderr
    ds = open_results(out)
    assert (ds["status"] == "done").all(), ds["status"].values
    assert ds.attrs["sweep_run_state"] == "finished"


@pytest.mark.slow
def test_verbose_logs_what_the_workers_do_with_children(tmp_path):
    recipe, out = local_recipe(tmp_path, seconds=0.0)
    quiet = cli("submit", str(recipe), "--no-progress", "--output", str(tmp_path / "q"))
    assert quiet.returncode == 0 and "spawned child" not in quiet.stderr, quiet.stderr
    loud = cli("-v", "submit", str(recipe), "--no-progress")
    assert loud.returncode == 0, loud.stderr
    assert "sweep.worker.child INFO" in loud.stderr and "spawned child pid" in loud.stderr, loud.stderr


def test_every_sweep_error_exits_2_with_one_line(tmp_path, capsys):
    from sweep.cli.app import main

    assert main(["status", str(tmp_path / "nothing.zarr")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sweep status: error:") and "nothing.zarr does not exist" in err, err
    (tmp_path / "other").mkdir()
    assert main(["status", str(tmp_path / "other")]) == 2
    assert "is not a sweep result store (no zarr.json)" in capsys.readouterr().err


@pytest.mark.slow
def test_status_of_a_running_sweep_counts_ended_points_once(client, tmp_path, capsys):
    """Found: `done 4 / running 4 / pending -2`: the running list is published every 2 s and
    was not checked against the store."""
    import os
    import socket
    import time

    from sweep.client.driver import DriverState
    from sweep.store import Store

    out = tmp_path / "out.zarr"
    s = Sweep(f"{JOBS}:square", {"grid": {"x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}}, output=out)
    s.run(client=client, progress=False)
    with Store.open(out, s.loaded) as store:  # a run holds the store: points 4 and 5 pending again
        store._put("status", [(4,), (5,)], ["pending", "pending"])
        running = [{"index": [i], "host": "h", "cores": [0], "since": time.time()} for i in (2, 3, 4, 5)]
        DriverState(os.getpid(), socket.gethostname(), time.time(), ["sweep"], running=running).save(out)
        capsys.readouterr()
        main(["status", str(out)])
        said = capsys.readouterr().out
    assert "running  2" in said and "done     4" in said and "pending" not in said, said


@pytest.mark.slow
def test_logs_selections_that_match_nothing_say_what_is_wrong(client, tmp_path, capsys):
    """Found: `--where x=abc` was a ValueError traceback; `--where x=99`, `--point nosuch` and
    `--attempt 5` said the point "printed nothing, or has not run"."""
    out = tmp_path / "out.zarr"
    Sweep(f"{JOBS}:chatty", {"grid": {"x": [1, 2]}}, output=out).run(client=client, progress=False)
    for extra, said in (
        (["--where", "x=abc"], "x takes numbers"),
        (["--where", "x=99"], "no point has x = 99 (it takes 1, 2)"),
        (["--point", "nosuch"], "--point nosuch: no such point"),
        (["--where", "x=1", "--attempt", "5"], "made 1 attempt(s) at most"),
    ):
        capsys.readouterr()
        assert main(["logs", str(out), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err


def test_force_and_keep_done_together_are_refused(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as exit_:
        main(["submit", "recipes/quickstart.yaml", "--force", "--keep-done"])
    assert exit_.value.code == 2 and "not allowed with" in capsys.readouterr().err


@pytest.mark.slow
def test_ls_counts_pruned_apart_and_shows_damaged_points(client, tmp_path, capsys):
    import shutil

    out = tmp_path / "results" / "out.zarr"
    Sweep(f"{JOBS}:square", {"grid": {"x": [1.0, 2.0]}}, output=out, name="two").run(
        client=client, progress=False
    )
    shutil.rmtree(out / "y")
    capsys.readouterr()
    assert main(["ls", str(tmp_path / "results")]) == 0
    assert "2/0/2 (2 damaged)" in capsys.readouterr().out


def test_validate_tells_every_problem_one_line_each(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("job: nosuch.py:f\nparams:\n  grid: {x: [1]}\nresources: {threads: 0}\n")
    assert main(["validate", str(recipe)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "resources.threads" in err[0] and "job file" in err[1], err


@pytest.mark.slow
def test_submit_without_progress_still_says_what_failed(client, tmp_path, capsys):
    """Found: `sweep submit --no-progress` printed nothing at all when points failed (exit 1)."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:fail_if",
                "params": {"grid": {"x": [0, 1, 2]}, "fixed": {"bad": 1}},
                "cluster": {"dashboard": "127.0.0.1:0"},
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    assert main(["submit", str(recipe), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(
        "1 failed of 3 points; `sweep status " + str(tmp_path / "out.zarr") + "` says why"
    ), err


def test_the_command_shows_warnings_as_one_line_except_library_notices(capsys):
    import warnings

    from sweep.cli.app import _setup_logging

    with warnings.catch_warnings():
        _setup_logging(0)
        warnings.simplefilter("always")
        warnings.warn("a plan that needs looking at", UserWarning, stacklevel=1)
        warnings.warn("crc32c usage is deprecated", DeprecationWarning, stacklevel=1)
        warnings.warn("The codec `vlen-utf8` is currently not part of the spec", UserWarning, stacklevel=1)
        # distributed's, when another process holds the dashboard's port
        warnings.warn("Port 8787 is already in use.\nHosting on port 41 instead", UserWarning, stacklevel=1)
    assert capsys.readouterr().err == (
        "sweep: warning: a plan that needs looking at\n"
        "sweep: warning: Port 8787 is already in use. Hosting on port 41 instead\n"
    )


def test_validate_shows_only_the_resources_that_are_set(capsys):
    recipe = str(ROOT / "recipes" / "quickstart.yaml")
    assert main(["validate", recipe]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  resources"))
    assert line == "  resources threads=1 timeout=300 stall=300 retries=1"  # no memory=None
    assert main(["validate", recipe, "--set", "resources.memory=1GiB"]) == 0
    assert "memory=1024MiB" in capsys.readouterr().out


@pytest.mark.slow
def test_ls_lines_up_its_columns(client, tmp_path, capsys):
    for name in ("a", "a-much-longer-name"):
        out = tmp_path / "results" / f"{name}.zarr"
        Sweep(f"{JOBS}:noop", {"grid": {"x": [1]}}, output=out, name=name).run(client=client, progress=False)
    capsys.readouterr()
    assert main(["ls", str(tmp_path / "results")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    for column in (1, 2):  # name, counts: each starts at the same place on every line
        starts = {line.index(re.split(r"\s{2,}", line)[column], len(line.split()[0])) for line in lines}
        assert len(starts) == 1, lines
    # found: 165 columns, the run column a sentence; now a few words ("finished 2026-12-07 09:56")
    runs = [re.split(r"\s{2,}", line)[3] for line in lines[1:]]
    assert all(r.startswith("finished 20") and len(r) <= 25 for r in runs), lines


def test_status_shows_the_exception_behind_an_introducing_line():
    """Found: an MPI rank's exception was hidden behind "rank 1 of 2 failed:" in `status`."""
    from sweep.cli.facts import headline as _headline

    rank = "rank 1 of 2 failed:\nTraceback (most recent call last):\n  File x\nRuntimeError: rank 1 gives up"
    assert _headline(rank) == "rank 1 of 2 failed: RuntimeError: rank 1 gives up"
    assert _headline("Traceback (most recent call last):\n  File x\nValueError: bad") == "ValueError: bad"
    timed_out = "timed out after 5 s (resources.timeout)"
    assert _headline(f"{timed_out}\nmore") == timed_out


def test_status_shows_the_exception_not_jaxs_note_after_it():
    """Found: a JAX error's status line was "For simplicity, JAX has removed its internal frames"."""
    from sweep.cli.facts import headline as _headline

    error = (
        "Traceback (most recent call last):\n  File x\nValueError: inconsistent size\n"
        "--------------------\nFor simplicity, JAX has removed its internal frames from the traceback."
    )
    assert _headline(error) == "ValueError: inconsistent size"


SIGTERM_AT_START = """
import os, signal, sys, time
import sweep.cli.app as app
import sweep.cli.validate as validate
sys.argv = ["sweep", "validate", "r.yaml"]
def slow_load(args):  # a SIGTERM while the command starts, before it runs anything
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
validate._load = slow_load
sys.exit(app.main())
"""


def test_a_sigterm_as_the_command_starts_is_one_line_and_exit_143():
    """Found: SIGTERM in a command's first ~0.6 s killed it with no message."""
    import sys

    done = subprocess.run(
        [sys.executable, "-c", SIGTERM_AT_START], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert done.stderr.strip() == "sweep validate: terminated (SIGTERM); interrupted", done.stderr
