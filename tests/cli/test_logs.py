"""What every attempt of every point printed is kept with the results (`sweep logs`)."""

import subprocess
import time

import pytest
import yaml

from sweep import Sweep, open_results
from sweep.cli.app import main
from sweep.store.lock import locked
from tests.helpers import JOBS, ROOT, sweep_command


def run_chatty(tmp_path, capsys):
    path = tmp_path / "chatty.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:chatty",
                "params": {"grid": {"x": [0, 1, 2], "y": ["a", "b"]}, "fixed": {"fail": 1}},
                "resources": {"retries": 1},
                "cluster": {"dashboard": "127.0.0.1:0"},
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    assert main(["submit", str(path), "--no-progress"]) == 1  # x=1 fails twice, for each y
    capsys.readouterr()
    return tmp_path / "out.zarr"


def logs(capsys, *args):
    rc = main(["logs", *args])
    return rc, capsys.readouterr().out


@pytest.mark.slow
def test_logs_of_a_point_that_succeeded_and_of_every_attempt_of_one_that_failed(client, tmp_path, capsys):
    out = run_chatty(tmp_path, capsys)
    rc, text = logs(capsys, str(out), "--where", "x=0", "--where", "y=a")
    assert rc == 0 and "attempt 1 <==" in text and "hello from 0" in text and "warning from 0" in text
    assert "hello from 1" not in text and text.count("==> point") == 1
    rc, text = logs(capsys, str(out), "--where", "x=1")
    assert text.count("hello from 1") == 4 and "attempt 2 <==" in text  # 2 attempts, 2 values of y
    # the error that ended each failed point follows what its last attempt printed
    assert text.count(" ended failed <==") == 2 and text.count("ValueError: x=1 fails") == 2, text
    assert text.index("ValueError") > text.index("attempt 2 <==")
    assert "in chatty" in text and "sweep/child" not in text, text  # the job's frames, not sweep's
    rc, text = logs(capsys, str(out), "--where", "x=1", "--where", "y=b", "--attempt", "2")
    assert text.count("hello from 1") == 1 and "ValueError" not in text  # one attempt's output only
    pid = str(open_results(out)["point_id"].sel(x=2, y="a").item())
    rc, text = logs(capsys, str(out), "--point", pid)
    assert f"point {pid} attempt 1" in text and "hello from 2" in text and "hello from 0" not in text
    rc, text = logs(capsys, str(out))
    assert text.count("==> point") == 10  # (1 + 2 + 1 attempts + 1 error) x 2


@pytest.mark.slow
def test_what_a_job_printed_without_flushing_is_kept(client, tmp_path, capsys):
    """Found trying the tool as a user: a job's plain `print` (a file is block-buffered) was
    still in the child's buffer when the point ended, and `sweep logs` said it printed nothing."""
    from sweep import Sweep

    out = tmp_path / "plain.zarr"
    # as in a user's shell: no PYTHONUNBUFFERED (which hid this where it is set, as in CI)
    child = {"env": {"PYTHONUNBUFFERED": ""}}
    s = Sweep(f"{JOBS}:unflushed", {"grid": {"x": [0, 1]}}, output=out, child=child)
    s.run(client=client, progress=False)
    rc, text = logs(capsys, str(out), "--where", "x=1")
    assert rc == 0 and "plain print from 1" in text and "plain warning from 1" in text, text


@pytest.mark.slow
def test_logs_where_names_the_axes_on_a_typo(client, tmp_path, capsys):
    out = run_chatty(tmp_path, capsys)
    rc = main(["logs", str(out), "--where", "z=1"])
    assert rc == 2 and "AXIS one of ['x', 'y']" in capsys.readouterr().err


@pytest.mark.slow
def test_logs_follow_streams_a_running_point_through_its_retry(tmp_path):
    """Detached sweep; `sweep logs --follow` of a point printing every 0.3 s shows its lines
    while it runs (before the point ends), each exactly once, both attempts, then exits 0.
    The point's first attempt ends only once the test has read its last tick through the
    follower (a gate file): the lines were streamed, whatever the machine's speed."""
    path = tmp_path / "tick.yaml"
    marks = tmp_path / "marks"
    marks.mkdir()
    gate = tmp_path / "gate"
    out = tmp_path / "tick.zarr"
    path.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:ticker",
                "params": {
                    "grid": {"x": [0, 1]},
                    "fixed": {"n": 12, "every": 0.3, "folder": str(marks), "gate": str(gate)},
                },
                "resources": {"retries": 1},
                "cluster": {"dashboard": "127.0.0.1:0"},
                "output": str(out),
            }
        )
    )
    assert (
        subprocess.run(sweep_command("submit", str(path), "--detach"), cwd=ROOT, timeout=300).returncode == 0
    )
    pid = str(open_results(out)["point_id"].sel(x=1).item())
    follower = subprocess.Popen(
        sweep_command("logs", str(out), "--point", pid, "--follow"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert follower.stdout is not None
    lines = []
    for line in follower.stdout:
        lines.append(line.rstrip("\n"))
        if "tick 11" in line:  # the first attempt's last tick, read while that attempt waits
            gate.touch()
    assert follower.wait(timeout=120) == 0
    assert "x=1 gate open" in lines  # the first attempt's lines came while it ran
    ticks = [line for line in lines if "tick" in line]
    assert [line.split()[2] for line in ticks] == [str(i) for i in range(12)] * 2  # both attempts, in order
    assert [line for line in lines if line.startswith("==>")] == [
        f"==> point {pid} attempt 1 <==",
        f"==> point {pid} attempt 2 <==",
    ]
    # the point ended; following it again prints what was kept and returns at once
    deadline = time.monotonic() + 120
    while locked(out):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    again = subprocess.run(
        sweep_command("logs", str(out), "--point", pid, "--follow"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0 and again.stdout.count("tick 11") == 2


@pytest.mark.slow
def test_logs_follow_wants_one_point(client, tmp_path, capsys):
    out = run_chatty(tmp_path, capsys)
    assert main(["logs", str(out), "--where", "x=1", "--follow"]) == 2
    assert "--follow streams one point and 2 are selected" in capsys.readouterr().err


@pytest.mark.slow
def test_a_cancelled_attempts_output_is_kept(client, tmp_path, capsys):
    """Found: the output of an attempt killed by a cancel was lost."""
    out = tmp_path / "out.zarr"
    s = Sweep(f"{JOBS}:ticker", {"grid": {"x": [1]}, "fixed": {"n": 100, "every": 0.1}}, output=out)
    run = s.start(client=client, progress=False)
    deadline = time.monotonic() + 120
    while not run.progress().get("running"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1.5)
    ds = run.cancel()
    assert ds["status"].item() == "pending"
    capsys.readouterr()
    assert main(["logs", str(out)]) == 0
    said = capsys.readouterr().out
    assert "==> point" in said and "attempt 1 <==" in said and "x=1 tick 3" in said, said


def test_a_retry_keeps_the_earlier_runs_attempt_logs(client, tmp_path):
    """Found: attempts were numbered from 1 in each run, so `sweep retry` wrote over
    ``logs/<point>/1.txt``, the failing attempt's traceback the user retries for."""
    s = Sweep(f"{JOBS}:chatty", {"grid": {"x": [1]}, "fixed": {"fail": 1}}, output=tmp_path / "r.zarr")
    s.run(client=client, progress=False)
    s.run(client=client, progress=False, only_failed=True)
    (folder,) = (tmp_path / "r.zarr" / "logs").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["1.txt", "2.txt"]
    assert all("hello from 1" in p.read_text() for p in folder.iterdir())


def test_an_attempt_that_printed_nothing_shows_no_bare_heading(client, tmp_path, capsys):
    """Found: `sweep logs` of a cancelled sweep printed four bare `==> point ... attempt 1 <==`
    headings, one for each point running at the cancel (now pending), and nothing else."""
    out = tmp_path / "out.zarr"
    ds = Sweep(f"{JOBS}:noop", {"grid": {"x": [1]}}, output=out).run(client=client, progress=False)
    folder = out / "logs" / str(ds["point_id"].item())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "2.txt").write_text("")  # an attempt cancelled before it printed
    rc, said = logs(capsys, str(out))
    assert rc == 0 and "attempt 2 <==" not in said, said
