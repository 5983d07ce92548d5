"""TPU points without a chip (sweep/worker/tpus.py): a fake chip listing, real leases, real
children and real sweeps. ``$SWEEP_FAKE_TPUS`` replaces the node's listing; the jobs run on the
CPU (``child.platforms: cpu``). tests/worker/test_tpu_device.py runs on a real chip where one is.
"""

import threading
import time

import pytest

from sweep import Sweep
from sweep.capacity import accelerators
from sweep.model.recipe import Resources
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.placement import Placement
from sweep.worker import tpus
from sweep.worker.devices import DeviceLeases
from sweep.worker.pool import CorePool
from tests.helpers import JOBS, cli, write_recipe

CPU = ChildConfig(platforms="cpu", compile_cache=None)
ENV = JobRef("file", str(JOBS), "tpu_env")


def test_chips_are_the_accel_devices_or_vfio_groups_or_the_fake(tmp_path):
    (tmp_path / "vfio").mkdir()
    for name in ("accel1", "accel0", "accel10", "vfio/0", "vfio/vfio"):
        (tmp_path / name).touch()
    assert [d.key for d in tpus.detect({}, tmp_path)] == ["accel0", "accel1", "accel10"]
    for name in ("accel1", "accel0", "accel10"):
        (tmp_path / name).unlink()
    assert [d.key for d in tpus.detect({}, tmp_path)] == ["0"]
    assert len(tpus.detect({tpus.FAKE: "4"}, tmp_path)) == 4


def test_a_child_on_some_chips_is_told_which_and_one_on_all_is_told_nothing():
    chips = tpus.detect({tpus.FAKE: "4"})
    one = tpus.environ(chips[2:3], 1.0, 4)
    assert one["TPU_VISIBLE_CHIPS"] == "2" and one["TPU_PROCESS_BOUNDS"] == "1,1,1"
    assert one["TPU_PROCESS_PORT"] != tpus.environ(chips[:1], 1.0, 4)["TPU_PROCESS_PORT"]
    assert tpus.environ(chips, 1.0, 4) == {}


def test_a_chip_is_leased_whole_by_one_process_at_a_time(tmp_path):
    chips = tpus.detect({tpus.FAKE: "1"})
    a, b = (DeviceLeases(tpus.TPU, chips, tmp_path) for _ in range(2))  # two processes' handles
    held = a.hold(1, "first")
    assert held is not None and b.hold(1, "second") is None
    with pytest.raises(ValueError, match="whole devices only"):
        b.hold(0.5, "half")
    held.release()
    assert b.hold(1, "second") is not None


def test_a_recipe_asks_whole_chips_not_beside_gpus_or_ranks():
    assert Resources(tpus=1).tpus == 1
    for bad, match in (
        ({"tpus": 3}, "tpus"),
        ({"tpus": 1, "gpus": 1}, "GPUs or TPUs, not both"),
        ({"tpus": 1, "ranks": 2}, "ranks"),
    ):
        with pytest.raises(ValueError, match=match):
            Resources(**bad)


def test_a_tpu_point_s_budget_counts_the_runtime_s_threads_and_its_children_run_jax_on_tpu(tmp_path):
    from sweep.client import plan
    from sweep.model.recipe import Recipe

    loaded = Recipe.from_dict(
        {"job": f"{JOBS}:tpu_env", "params": {"grid": {"x": [0]}}, "resources": {"tpus": 1}}
    )
    where = plan.placement(loaded.recipe)
    assert where.tpus == 1 and where.thread_budget == 17 + accelerators.TPU_RUNTIME_THREADS
    assert plan.child_platforms(loaded.recipe, plan.placement(loaded.recipe)) == "tpu"


@pytest.mark.parametrize(
    ("cluster", "threads", "cores"),
    [({"threads": 13}, 1, 3), ({"threads": 13}, 4, 6), ({"threads": 2}, 1, 2), ({"threads": 1}, 1, 1)],
)
def test_a_tpu_point_leases_its_host_runtime_s_cores_as_far_as_the_node_has_them(cluster, threads, cores):
    """Found on the TPU machine: CPU points beside a TPU point took 1.38x their time alone;
    the TPU child's host runtime ran on their cores."""
    from sweep.client import plan
    from sweep.model.recipe import Recipe

    resources = {"tpus": 1, "threads": threads}
    loaded = Recipe.from_dict(
        {"job": f"{JOBS}:tpu_env", "params": {"grid": {"x": [0]}}, "resources": resources, "cluster": cluster}
    )
    assert accelerators.TPU_HOST_CORES == 2
    assert plan.placement(loaded.recipe).cores == cores
    cpu_only = Recipe.from_dict(
        {"job": f"{JOBS}:tpu_env", "params": {"grid": {"x": [0]}}, "cluster": cluster}
    )
    assert plan.placement(cpu_only.recipe).cores == 1


def test_the_plan_says_a_tpu_point_s_cores_include_its_host_runtime_s(monkeypatch):
    from sweep.cluster.plantext import plan_text
    from sweep.model.settings import ClusterSettings

    monkeypatch.setenv(tpus.FAKE, "1")
    text = plan_text(ClusterSettings(threads=2), Placement(2, tpus=1), 4)
    assert "1 point of 2 cores (with its TPU chip's host runtime's) and tpus=1 at a time" in text, text
    assert "host runtime" not in plan_text(ClusterSettings(threads=2), Placement(1), 4)


def test_validate_refuses_more_chips_than_the_node_has(tmp_path, monkeypatch):
    monkeypatch.setenv(tpus.FAKE, "1")
    base = {"job": "tpu_env", "params": {"grid": {"x": [0]}}, "output": tmp_path / "v.zarr"}
    r = cli("validate", str(write_recipe(tmp_path / "two.yaml", **base, resources={"tpus": 2})))
    assert r.returncode == 2 and "resources.tpus=2 but the local worker has 1 TPU chip(s)" in r.stderr, (
        r.stderr
    )


@pytest.mark.slow
def test_a_tpu_child_holds_its_chip_while_it_lives_and_serves_only_tpu_points(monkeypatch):
    monkeypatch.setenv(tpus.FAKE, "1")
    pool = CorePool()
    pool.setup()
    chip = Placement(1, tpus=1)
    try:
        with pool.lease(chip, CPU) as tpu_child:
            pid = tpu_child.pid
        assert pool.accelerators.leases["tpus"].hold(1, "a bystander") is None  # the idle child holds it
        with pool.lease(Placement(1), CPU) as cpu_child:
            assert cpu_child.pid != pid and cpu_child.devices is None
        with pool.lease(chip, CPU) as again:
            assert again.pid == pid  # the warm TPU child, chip and all
    finally:
        pool.teardown()
    bystander = DeviceLeases(tpus.TPU, tpus.detect())
    after = bystander.hold(1, "after")
    assert after is not None  # released as the child exited
    after.release()
    bystander.close()


@pytest.mark.slow
def test_two_tpu_points_on_one_chip_run_one_after_the_other_never_together(monkeypatch):
    """A second child asking for a chip another child holds would fail in libtpu: the lease
    serialises them, and the second closes the first's idle child to get it."""
    monkeypatch.setenv(tpus.FAKE, "1")
    pool = CorePool()
    pool.setup()
    spans: list[tuple[float, float, int]] = []

    def point() -> None:
        with pool.lease(Placement(1, tpus=1), CPU) as child:
            t0 = time.monotonic()
            record = child.run(ENV, {"seconds": 1.0})
            spans.append((t0, time.monotonic(), record.status == "done"))

    try:
        threads = [threading.Thread(target=point) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        pool.teardown()
    (a0, a1, ok_a), (b0, b1, ok_b) = sorted(spans)
    assert ok_a and ok_b and b0 >= a1, spans


@pytest.mark.slow
def test_a_sweep_of_tpu_points_on_two_fake_chips_tells_each_child_its_chip(tmp_path, monkeypatch):
    monkeypatch.setenv(tpus.FAKE, "2")
    ds = Sweep(
        f"{JOBS}:tpu_env",
        {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"seconds": 0.5}},
        output=tmp_path / "t.zarr",
        resources={"tpus": 1},
        child={"platforms": "cpu"},
        cluster={"dashboard": "127.0.0.1:0"},
    ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    chips = {str(c) for c in ds["tpus"].values}
    assert chips <= {"0", "1"} and set(ds["chip"].values.astype(int).astype(str)) == chips
    assert all(str(int(c)) == t for c, t in zip(ds["chip"].values, ds["tpus"].values))
    assert (ds["on_tpu"] == 0).all()  # child.platforms: cpu, as asked
