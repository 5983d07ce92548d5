"""GPU points without a device (sweep/worker/gpus.py): a fake device listing, real leases, real sweeps.

``$SWEEP_FAKE_GPUS`` replaces what ``nvidia-smi`` lists, so workers offer devices, points
lease their slots node-wide and children get their environment; the jobs run JAX on the CPU
(``child.platforms: cpu``). ``tests/worker/test_gpu_device.py`` runs on a real device where one is.
"""

import importlib.util

import numpy as np
import pytest

from sweep import Sweep
from sweep.model.backends import gpu_directives
from sweep.wire.placement import Placement
from sweep.worker import gpus
from sweep.worker.devices import Device, DeviceLeases, Held
from tests.helpers import JOBS, cli, submit_side_by_side, write_recipe

SMI = "0, GPU-aaaa, NVIDIA H200, 143771\n1, GPU-bbbb, NVIDIA H200, 143771\n"


def test_the_listing_is_read_from_nvidia_smi_or_the_fake_and_limited_to_visible_devices():
    assert [(d.index, d.key, d.memory) for d in gpus.parse_smi(SMI)] == [
        ("0", "GPU-aaaa", 143771 << 20),
        ("1", "GPU-bbbb", 143771 << 20),
    ]
    fake = gpus.detect({gpus.FAKE: "3x80GiB"})
    assert [d.index for d in fake] == ["0", "1", "2"] and fake[0].memory == 80 << 30
    assert [d.index for d in gpus.detect({gpus.FAKE: "3", "CUDA_VISIBLE_DEVICES": "2"})] == ["2"]


def test_whole_devices_and_shares_are_whole_numbers_of_slots():
    assert gpus.GPU.split(1) == (1, gpus.GPU.slots) and gpus.GPU.split(2) == (2, gpus.GPU.slots)
    assert gpus.GPU.split(0.5) == (1, gpus.GPU.slots // 2) and gpus.GPU.split(0.25) == (
        1,
        gpus.GPU.slots // 4,
    )
    for bad in (0.4, 1.5, 0.33, 5e-8, 1e-9):  # 5e-8 once rounded to 0 slots and passed
        with pytest.raises(ValueError, match="resources.gpus"):
            gpus.GPU.split(bad)
    assert gpus.GPU.split(0.333333) == (1, 4) and gpus.GPU.split(0.16667) == (1, 2)  # written by people


def test_a_recipe_share_may_be_a_fraction_and_says_how_to_write_a_third():
    from sweep.model.recipe import Resources

    assert Resources(gpus="1/3").gpus == pytest.approx(1 / 3) and Resources(gpus=0.333333).gpus == 0.333333
    with pytest.raises(ValueError, match='write a third as "1/3"'):
        Resources(gpus=0.3)


def test_leases_of_two_workers_share_a_device_by_halves_and_never_past_it(tmp_path):
    devices = gpus.detect({gpus.FAKE: "2"})
    a, b, c = (DeviceLeases(gpus.GPU, devices, tmp_path) for _ in range(3))  # three processes' handles
    first, second = a.hold(0.5, "first"), b.hold(0.5, "second")
    assert first.devices == second.devices == (devices[0],)  # two halves of device 0
    third = c.hold(0.5, "third")
    assert third.devices == (devices[1],)
    assert c.hold(1, "whole") is None  # both devices are partly held
    first.release()
    second.release()
    whole = c.hold(1, "whole")
    assert whole is not None and whole.devices == (devices[0],)
    fourth = a.hold(0.5, "fourth")  # device 0 is held whole: the other half of device 1
    assert fourth.devices == (devices[1],)
    assert b.hold(0.5, "fifth") is None


def test_a_share_tells_the_child_its_device_and_memory_fraction():
    held = Held(gpus.GPU, (Device("1", "k", "d", 1 << 30),), 0.5, [])  # no leases: environ only
    assert held.environ() == {
        "CUDA_VISIBLE_DEVICES": "1",
        "HIP_VISIBLE_DEVICES": "1",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.375",
    }
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in Held(gpus.GPU, held.devices, 1.0, []).environ()


def test_the_memory_of_a_points_processes_is_summed_from_nvidia_smi():
    text = "101, 2048\n202, 512\n303, 100\n"
    assert gpus.apps_memory(text, {101, 202}) == (2048 + 512) << 20


@pytest.mark.parametrize(
    ("kind", "directive"),
    [("slurm", "--gres=gpu:2"), ("pbs", "-l ngpus=2"), ("sge", "-l gpu=2"), ("lsf", '-gpu "num=2"')],
)
def test_batch_jobs_ask_their_scheduler_for_the_devices(kind, directive):
    assert gpu_directives(kind, 2, ["--exclusive"]) == ["--exclusive", directive]
    assert gpu_directives("htcondor", 2, {"+Owner": "me"}) == {"+Owner": "me", "request_gpus": "2"}


@pytest.mark.slow
def test_a_slurm_job_script_asks_for_the_devices_and_its_worker_offers_them(tmp_path):
    recipe = write_recipe(
        tmp_path / "r.yaml",
        job="gpu_env",
        params={"grid": {"x": [0]}},
        resources={"gpus": 1},
        cluster={
            "kind": "slurm",
            "cores": 2,
            "memory": "8GiB",
            "gpus": 2,
            "shared_temp_directory": str(tmp_path),
        },
    )
    r = cli("submit", str(recipe), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "#SBATCH --gres=gpu:2" in r.stdout and "gpus=2" in r.stdout, r.stdout


@pytest.mark.slow
def test_two_halves_of_one_device_run_at_once_each_told_its_device_and_share(tmp_path, monkeypatch):
    monkeypatch.setenv(gpus.FAKE, "1")
    ds = Sweep(
        f"{JOBS}:gpu_env",
        {"grid": {"x": [0, 1]}, "fixed": {"seconds": 2.0}},
        output=tmp_path / "g.zarr",
        resources={"gpus": 0.5},
        child={"platforms": "cpu"},
        cluster={"dashboard": "127.0.0.1:0"},
    ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert (ds["device"] == 0).all() and (ds["hip_device"] == 0).all() and (ds["on_cpu"] == 1).all()
    assert (ds["fraction"] == 0.375).all() and (ds["gpus"] == "0").all()
    (a, b) = zip(ds["started"].values, ds["finished"].values)
    assert a[0] < b[1] and b[0] < a[1], (a, b)  # they shared the device


@pytest.mark.slow
def test_two_sweeps_asking_the_one_device_whole_never_run_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv(gpus.FAKE, "1")
    keys = {
        "job": "gpu_env",
        "params": {"grid": {"x": [0, 1]}, "fixed": {"seconds": 1.0}},
        "resources": {"gpus": 1},
        "child": {"platforms": "cpu"},
    }
    left, right = submit_side_by_side(tmp_path, {"left": keys, "right": keys})
    for ds in (left, right):
        assert (ds["status"] == "done").all(), ds["error"].values
        assert np.isnan(ds["fraction"].values).all()  # a whole device: XLA's own default
    spans = sorted(
        (s, e) for ds in (left, right) for s, e in zip(ds["started"].values, ds["finished"].values)
    )
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:])), spans  # 2 cores, but one device


@pytest.mark.slow
def test_validate_refuses_gpus_without_devices_a_bad_share_and_a_jax_without_cuda(tmp_path, monkeypatch):
    base = {"job": "gpu_env", "params": {"grid": {"x": [0]}}, "output": tmp_path / "v.zarr"}
    monkeypatch.delenv(gpus.FAKE, raising=False)
    if gpus.detect():
        pytest.skip("this machine has devices")
    r = cli("validate", str(write_recipe(tmp_path / "none.yaml", **base, resources={"gpus": 0.5})))
    assert r.returncode == 2 and "the local worker has 0 GPU(s)" in r.stderr, r.stderr
    r = cli("validate", str(write_recipe(tmp_path / "share.yaml", **base, resources={"gpus": 0.4})))
    assert r.returncode == 2 and "1/2, 1/3, 1/4, 1/6 or 1/12" in r.stderr, r.stderr
    monkeypatch.setenv(gpus.FAKE, "1")
    r = cli("validate", str(write_recipe(tmp_path / "cuda.yaml", **base, resources={"gpus": 1})))
    if any(importlib.util.find_spec(p) for p in gpus.CUDA_PLUGINS):
        pytest.skip("this JAX has GPU support")
    assert r.returncode == 2 and 'pip install -U "jax[cuda12]"' in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_plan_names_gpus_as_the_limit_and_more_gpus_than_the_machine_is_refused(tmp_path, monkeypatch):
    """Found: a GPU plan line said "limited by cores", and cluster.gpus above the devices passed
    validate, then Dask's "Compute Failed" blocks flooded the terminal."""
    monkeypatch.setenv(gpus.FAKE, "1")
    base = {"job": "gpu_env", "params": {"grid": {"x": [0, 1, 2]}}, "output": tmp_path / "v.zarr"}
    from sweep.cluster.plantext import plan_text
    from sweep.model.recipe import ClusterSettings

    line = plan_text(ClusterSettings(threads=8), Placement(1, gpus=0.5), 3)
    assert "2 points of 1 core and gpus=0.5 at a time, limited by GPUs" in line, line
    recipe = write_recipe(tmp_path / "many.yaml", **base, resources={"gpus": 1}, cluster={"gpus": 2})
    r = cli("validate", str(recipe))
    assert r.returncode == 2 and "cluster.gpus=2 but this machine has 1 GPU(s)" in r.stderr, r.stderr
