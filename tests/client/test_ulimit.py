"""The problem this project exists for: JAX processes dying at `ulimit -u`.

A real sweep runs as an unprivileged user (root ignores RLIMIT_NPROC) under `ulimit -u 150`.
Its children see a 64-CPU node (tests/fakecpus.c, preloaded through ``child.env``) unless
they are pinned, so an uncapped JAX child wants ~180 threads while a capped one holds 15.
Capped, every point completes; uncapped, the JAX points abort in `pthread_create` and are
recorded as failed with the message, while the pure-Python points still complete.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from sweep import open_results
from tests.helpers import JOBS, ROOT, fakecpus_library, sweep_shell, unprivileged_user

USER = "sweep-ulimit"
LIMIT = 150

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.gcc]


@pytest.fixture(scope="module")
def user():
    with unprivileged_user(USER) as name:
        yield name


@pytest.fixture(scope="module")
def sandbox():
    folder = Path(tempfile.mkdtemp(prefix="sweep-ulimit-"))
    folder.chmod(0o777)
    fakecpus_library(folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def run_as_user(
    user: str, sandbox: Path, cap: bool, limit: int = LIMIT
) -> tuple[subprocess.CompletedProcess, Path]:
    out = sandbox / f"cap-{cap}.zarr"
    recipe = {
        "name": f"ulimit-cap-{cap}",
        "job": f"{JOBS}:jax_or_light",
        "params": {"grid": {"x": [0, 1, 2, 3], "kind": ["jax", "light"]}},
        "resources": {"threads": 1},
        "child": {
            "cap": cap,
            "compile_cache": False,
            "env": {"LD_PRELOAD": str(sandbox / "fakecpus.so"), "FAKE_NCPUS": "64"},
        },
        "cluster": {"kind": "local", "dashboard": "127.0.0.1:0"},
        "output": str(out),
    }
    path = sandbox / f"cap-{cap}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    os.chmod(path, 0o644)
    command = f"ulimit -u {limit} && exec {sweep_shell()} submit {path} --no-progress"
    env = {"PATH": os.environ["PATH"], "HOME": str(sandbox), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["runuser", "-u", user, "--", "bash", "-c", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, out


def test_preflight_refuses_a_plan_that_cannot_fit_with_the_numbers(user, sandbox):
    proc, out = run_as_user(user, sandbox, cap=True, limit=40)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "ulimit -u is 40" in proc.stderr and "2 jobs x 17 threads" in proc.stderr
    assert not out.exists()


def test_capped_sweep_fits_under_ulimit_and_uncapped_one_aborts(user, sandbox):
    capped, out = run_as_user(user, sandbox, cap=True)
    assert capped.returncode == 0, capped.stderr[-3000:]
    ds = open_results(out)
    assert (ds["status"] == "done").all()
    assert int(ds["peak_threads"].sel(kind="jax").max()) <= 17

    uncapped, out = run_as_user(user, sandbox, cap=False)
    assert uncapped.returncode == 1, uncapped.stderr[-3000:]
    ds = open_results(out)
    jax_points, light_points = ds.sel(kind="jax"), ds.sel(kind="light")
    assert (light_points["status"] == "done").all()
    assert (jax_points["status"] == "failed").all()
    for error, tail in zip(jax_points["error"].values, jax_points["output_tail"].values):
        said = error + tail  # an abort's message is in the output, an exception's in the error
        assert "pthread_create" in said or "Resource temporarily unavailable" in said, said
