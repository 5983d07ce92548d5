"""What the tests share besides fixtures: paths, recipe writers, command runners, waits."""

import itertools
import os
import pwd
import shlex
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
from distributed import Client

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "tests" / "jobs.py"


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a zombie (ended, not yet reaped) does not."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def sweep_command(*args: str) -> list[str]:
    """The command line of ``sweep ARGS...`` in a fresh interpreter of this environment: every
    CLI run of the tests starts from it (:func:`cli`, or Popen for one that runs beside a test)."""
    return [sys.executable, "-m", "sweep.cli", *map(str, args)]


def as_from_a_terminal() -> None:
    """``preexec_fn`` of a process a test sends a terminal's signals to (Ctrl-C's SIGINT, a
    closed terminal's SIGHUP): they act as they do from a terminal, even when the test run was
    started in the background or under nohup, where they are ignored and its children inherit it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def sweep_shell(*args: str) -> str:
    """:func:`sweep_command` as one shell word list, for a command run by ``bash -c``."""
    return shlex.join(sweep_command(*args))


def cli(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """``sweep ARGS...`` in a fresh interpreter, run from the checkout, output captured."""
    kw.setdefault("cwd", ROOT)
    return subprocess.run(sweep_command(*args), capture_output=True, text=True, timeout=timeout, **kw)


def cli_submit(recipe, *extra: str, **kw) -> subprocess.CompletedProcess:
    """``sweep submit RECIPE --no-progress EXTRA...`` (:func:`cli`)."""
    return cli("submit", str(recipe), "--no-progress", *extra, **kw)


def fakecpus_library(folder: Path) -> Path:
    """tests/fakecpus.c built into ``folder``: preloaded (``LD_PRELOAD``), an unpinned process
    sees ``FAKE_NCPUS`` CPUs."""
    lib = folder / "fakecpus.so"
    source = ROOT / "tests" / "fakecpus.c"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(source), "-ldl"], check=True)
    return lib


def job(name: str) -> str:
    """A recipe job reference to a function of tests/jobs.py."""
    return f"{JOBS}:{name}"


@contextmanager
def scheduler_and_workers(tmp_path: Path, worker_args: list[str], workers: int = 1) -> Iterator[str]:
    """`dask scheduler` and `dask worker ADDRESS *worker_args` on 127.0.0.1, as a user starts
    them for `kind: address`; yields the address once ``workers`` worker processes are up."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
         "--dashboard-address", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, *worker_args, "--host", "127.0.0.1",
         "--dashboard-address", "127.0.0.1:0", "--local-directory", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(address, timeout="2s") as c:
                    if len(c.scheduler_info()["workers"]) >= workers:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "scheduler/workers did not come up"
            time.sleep(0.3)
        yield address
    finally:
        for p in (worker, scheduler):
            p.terminate()
            p.wait(30)


def kill_the_worker_mid_sweep(client: Client, tmp_path: Path) -> tuple[object, list[int], Path]:
    """Run 4 points of 2 s (``tests/jobs.py:marked``) on ``client``'s one worker, SIGKILL the
    worker once a job has started, check its children died with it, and wait for the sweep.
    Returns the dataset, the killed children's pids and the folder of start markers."""
    import glob
    import os
    import signal
    import threading

    import psutil

    from sweep import Sweep

    markers = tmp_path / "markers"
    markers.mkdir()
    result: dict = {}
    s = Sweep(
        f"{JOBS}:marked",
        {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"folder": str(markers), "seconds": 2.0}},
        output=tmp_path / "w.zarr",
    )
    t = threading.Thread(target=lambda: result.update(ds=s.run(client=client, progress=False)))
    t.start()
    deadline = time.monotonic() + 60
    while not glob.glob(str(markers / "start-*")):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (worker_pid,) = client.run(os.getpid).values()
    victims = psutil.Process(worker_pid).children(recursive=True)
    assert victims, "the worker should have capped children"
    os.kill(worker_pid, signal.SIGKILL)
    _, alive = psutil.wait_procs(victims, timeout=15)
    assert not alive, "children outlived their worker"
    t.join(180)
    assert not t.is_alive()
    return result["ds"], [v.pid for v in victims], markers


@contextmanager
def unprivileged_user(name: str) -> Iterator[str]:
    """An unprivileged account ``name`` (made if missing; needs root) that can reach the
    checkout, its .venv and the Python it links to: the traverse bit of each folder on the way
    is opened for the duration, then restored."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/bash", name], check=True)
    opened = []
    needed = {ROOT, Path(os.path.realpath(sys.executable)).parent, Path(sys.base_prefix)}
    folders = {p for path in needed for p in (path, *path.parents)}
    for folder in sorted(folders):
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)
            opened.append((folder, mode))
    try:
        yield name
    finally:
        for parent, mode in opened:
            parent.chmod(mode)


def write_recipe(path: Path, **recipe: Any) -> Path:
    """Write ``recipe`` (the keys of a recipe; ``job`` may be a function name of tests/jobs.py)
    to ``path`` as YAML, with a dashboard on a free 127.0.0.1 port unless ``cluster`` says."""
    import yaml

    if "job" in recipe and ":" not in recipe["job"]:
        recipe["job"] = job(recipe["job"])
    recipe.setdefault("cluster", {"dashboard": "127.0.0.1:0"})
    if "output" in recipe:
        recipe["output"] = str(recipe["output"])
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def submit(path: Path, capsys: Any, *extra: str) -> tuple[int, str]:
    """``sweep submit PATH --no-progress EXTRA...`` in this process: exit code and stderr."""
    from sweep.cli.app import main

    rc = main(["submit", str(path), "--no-progress", *extra])
    return rc, capsys.readouterr().err


def wait_for(predicate: Callable[[], Any], seconds: float = 120.0, every: float = 0.05) -> None:
    """Poll ``predicate`` every ``every`` seconds until it is true; fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(every)


def run_then_resume(job_ref: str, kwargs: dict, resume_from: int, **child_kw: Any) -> tuple[Any, Any]:
    """Run ``job_ref(**kwargs)`` whole in a capped child, then again in a fresh child restoring
    the checkpoint numbered ``resume_from`` the first run saved; both records."""
    from sweep.model.job import parse_job
    from sweep.worker.checkpoints import PointCheckpoints
    from sweep.worker.child import Child

    ref = parse_job(job_ref)
    saved: list = []
    cores = [sorted(os.sched_getaffinity(0))[0]]
    records = []
    for carried in (None, "resume"):
        if carried is not None:
            carried = next(s for s in saved if s.number == resume_from)
        points = PointCheckpoints("test", carried, saved.append, lambda: None)
        child = Child(cores, **child_kw)
        try:
            records.append(child.run(ref, kwargs, checkpoints=points))
        finally:
            child.close()
    return records[0], records[1]


def overlapping_pairs_share_no_core(*datasets: Any) -> list:
    """Pairs of points (across all datasets) that ran at the same time on a shared core."""
    runs = []
    for ds in datasets:
        for cores, start, end in zip(
            ds["cores"].values.ravel(), ds["started"].values.ravel(), ds["finished"].values.ravel()
        ):
            runs.append((set(cores.split(",")), start, end))
    return [(a, b) for a, b in itertools.combinations(runs, 2) if a[1] < b[2] and b[1] < a[2] and a[0] & b[0]]


def submit_side_by_side(tmp_path: Path, recipes: dict[str, dict[str, Any]]) -> list[Any]:
    """Run one ``sweep submit`` per recipe (name: the keys of ``write_recipe``) at the same
    time, each to ``tmp_path/NAME.zarr``; their result datasets once all have succeeded."""
    from sweep import open_results

    procs, outputs = [], []
    for name, keys in recipes.items():
        out = tmp_path / f"{name}.zarr"
        child = {"preflight": False, **keys.get("child", {})}
        recipe = write_recipe(tmp_path / f"{name}.yaml", name=name, output=out, **{**keys, "child": child})
        cmd = sweep_command("submit", str(recipe), "--no-progress")
        procs.append(subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True))
        outputs.append(out)
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    return [open_results(o) for o in outputs]


def intervals(ds: Any) -> list[tuple[float, float]]:
    """Each point's (start, end) in seconds, in the order they started."""
    import numpy as np

    started = ds["started"].values.astype("datetime64[ns]").astype(np.int64) / 1e9
    finished = ds["finished"].values.astype("datetime64[ns]").astype(np.int64) / 1e9
    return sorted(zip(started.tolist(), finished.tolist()))


def overlapping(spans: list[tuple[float, float]]) -> bool:
    """Whether any two of ``spans`` (sorted by start) ran at once."""
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))
