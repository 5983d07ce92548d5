"""Out of memory told apart: a point past resources.memory or killed by the kernel's OOM killer
reads ``oom``, and ``retry_memory`` retries it with more."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from sweep import Sweep
from sweep.model.job import parse_job
from sweep.worker.child import Child
from sweep.worker.oomkills import memory_cgroup, oom_kills
from tests.helpers import JOBS, ROOT


def test_a_v1_memory_cgroup_and_its_count_are_read(tmp_path, monkeypatch):
    folder = tmp_path / "memory" / "jobs" / "42"
    folder.mkdir(parents=True)
    (folder / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    proc = tmp_path / "cgroup"
    proc.write_text("9:cpu:/\n4:memory:/jobs/42\n0::/\n")
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda p, *a, **k: real(proc if p.name == "cgroup" else p))
    assert memory_cgroup(1, root=tmp_path) == folder
    assert oom_kills(folder) == 3


def test_a_v2_count_is_read_from_memory_events(tmp_path):
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n")
    assert oom_kills(tmp_path) == 2
    assert oom_kills(tmp_path / "nowhere") is None


@pytest.mark.slow
def test_the_memory_limit_reads_oom_and_a_retry_gets_twice_the_memory(client, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    params = {"grid": {"x": [0]}, "fixed": {"mb": 400, "folder": str(marks)}}
    plain = Sweep(f"{JOBS}:allocate", params, output=tmp_path / "a.zarr", resources={"memory": "300MiB"}).run(
        client=client, progress=False
    )
    assert plain["status"].item() == "oom"
    assert "memory limit exceeded" in plain["error"].item() and "> 300 MiB" in plain["error"].item()
    assert plain["peak_rss"].item() > 300 << 20

    again = Sweep(
        f"{JOBS}:allocate",
        params,
        output=tmp_path / "b.zarr",
        resources={"memory": "300MiB", "retries": 1, "retry_memory": "2x"},
    ).run(client=client, progress=False)
    assert again["status"].item() == "done" and again["attempts"].item() == 2
    assert again["mb"].item() == 400 and len(list(marks.iterdir())) == 3


def test_a_retry_memory_that_is_no_factor_is_refused():
    with pytest.raises(ValueError, match=r"not a factor above 1 \(up to 1000\); write e.g. 2x"):
        Sweep(f"{JOBS}:allocate", {"grid": {"x": [0]}}, resources={"retry_memory": "half"})


CGROUP_SCRIPT = """
import os, sys
from pathlib import Path
cgroup = Path(sys.argv[1])
(cgroup / "cgroup.procs").write_text(str(os.getpid()))
from sweep.worker.child import Child
from sweep.model.job import parse_job
child = Child([sorted(os.sched_getaffinity(0))[0]])
record = child.run(parse_job(sys.argv[2]), {"mb": 400, "hold": 2.0})
child.close()
print(record.status)
print(record.error)
"""


def _limited_cgroup(limit: int) -> Path | None:
    """A new memory cgroup under this process's, limited to ``limit`` bytes (cgroup v1 or v2),
    or None where this process can't make one."""
    here = memory_cgroup(os.getpid())
    if here is None or os.geteuid() != 0:
        return None
    made = here / f"sweep-test-{uuid.uuid4().hex[:6]}"
    try:
        made.mkdir()
        name = "memory.limit_in_bytes" if (made / "memory.limit_in_bytes").exists() else "memory.max"
        (made / name).write_text(str(limit))
    except OSError:
        return None
    return made


def test_a_child_killed_by_the_kernels_oom_killer_reads_oom():
    cgroup = _limited_cgroup(250 << 20)
    if cgroup is None:
        pytest.skip("needs root and a writable memory cgroup")
    try:
        out = subprocess.run(
            [sys.executable, "-c", CGROUP_SCRIPT, str(cgroup), f"{JOBS}:allocate"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        status, error = out.stdout.splitlines()[:2]
        assert status == "oom", out.stdout + out.stderr
        assert "out-of-memory killer" in error and str(cgroup) in error
    finally:
        cgroup.rmdir()


def test_a_sigkill_from_elsewhere_stays_a_plain_kill(tmp_path):
    child = Child([sorted(os.sched_getaffinity(0))[0]])
    try:
        record = child.run(parse_job(f"{JOBS}:stepper"), {"folder": str(tmp_path), "die_at": 0})
    finally:
        child.close()
    assert record.status == "failed" and record.signal == "SIGKILL"
    assert "out-of-memory" not in record.error


@pytest.mark.slow
def test_retries_with_more_memory_never_overcommit_the_worker(tmp_path):
    """Found: two points oom at 400 MiB on a 1 GiB worker and both retried at once with 800 MiB
    (RSS 781 + 331 MiB), inside tasks that still held only 400 each; a retry could get more
    than the worker offers. Retries now take their extra from the worker's offer, capped at it."""
    marks = tmp_path / "marks"
    marks.mkdir()
    ds = Sweep(
        f"{JOBS}:allocate_logged",
        {"grid": {"x": [0, 1]}, "fixed": {"mb": 750, "hold": 1.5, "folder": str(marks)}},
        resources={"memory": "400MiB", "retries": 1, "retry_memory": "3x"},  # 1200 MiB: over the offer
        cluster={"memory": "1GiB", "dashboard": "127.0.0.1:0"},
        output=tmp_path / "r.zarr",
    ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert (ds["attempts"] == 2).all()
    ran = sorted(
        (float(end.with_suffix(".start").read_text()), float(end.read_text())) for end in marks.glob("*.end")
    )
    assert len(ran) == 2
    (_, first_end), (second_start, _) = ran
    assert second_start >= first_end, ran  # 1 GiB holds one 750 MiB retry at a time, not two
