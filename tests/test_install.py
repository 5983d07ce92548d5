"""A built wheel installs into a clean venv outside the checkout and runs the quickstart.

The venv takes the wheel's dependencies from the package registry (pip's cache makes a second
run quick); the checkout is not on its path, so what runs is what the wheel ships."""

import subprocess
import sys
import venv

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow


def run(*args, cwd, timeout=900) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_a_built_wheel_installs_cleanly_and_runs_the_quickstart_it_writes(tmp_path):
    pytest.importorskip("build")
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--wheel", "--sdist", "--outdir", dist, ROOT, cwd=tmp_path)
    wheels, sdists = list(dist.glob("*.whl")), list(dist.glob("*.tar.gz"))
    assert len(wheels) == len(sdists) == 1
    assert "PASSED" in run(sys.executable, "-m", "twine", "check", *wheels, *sdists, cwd=tmp_path).stdout
    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    bin_ = env / "bin"
    run(bin_ / "python", "-m", "pip", "install", "-q", wheels[0], cwd=tmp_path)
    assert run(bin_ / "sweep", "--version", cwd=tmp_path).stdout.strip() == "sweep (capped-sweep) 0.1.0"
    doctor = run(bin_ / "sweep", "doctor", cwd=tmp_path, timeout=300)
    assert "threads" in doctor.stdout
    user = tmp_path / "user"
    run(bin_ / "sweep", "init", user, cwd=tmp_path)
    found = run(bin_ / "python", "-c", "import sweep; print(sweep.__file__)", cwd=user).stdout
    assert str(env) in found  # the installed package, not the checkout
    fewer_steps = ("--set", "params.fixed.steps=3")
    run(bin_ / "sweep", "submit", "quickstart.yaml", "--no-progress", *fewer_steps, cwd=user)
    status = run(bin_ / "sweep", "status", "results/quickstart.zarr", cwd=user).stdout
    assert "done" in status and "12" in status, status
