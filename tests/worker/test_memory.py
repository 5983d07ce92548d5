"""Packing by memory: workers offer memory, points ask it, and an unknown need is learned."""

import json

import psutil
import pytest

from sweep import Sweep
from sweep.capacity import memory as packing
from sweep.worker import memory
from tests.helpers import JOBS, cli, intervals, overlapping, write_recipe

MIB = 1 << 20


def test_the_learned_ask_is_a_margin_over_the_largest_peak_up_to_the_largest_worker():
    assert packing.learned_ask(0) is None
    assert packing.learned_ask(300 * MIB) == 375 * MIB
    assert packing.learned_ask(300 * MIB, most=320 * MIB) == 320 * MIB


def test_the_local_offer_is_the_given_memory_or_what_is_available_less_a_margin():
    assert memory.local_offer("1GiB") == 1 << 30
    assert 0 <= memory.local_offer() < psutil.virtual_memory().total


@pytest.mark.slow
def test_a_worker_of_1gib_never_runs_two_points_of_600mib_at_once(tmp_path):
    ds = Sweep(
        f"{JOBS}:allocate",
        {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"mb": 200, "hold": 1.0}},
        output=tmp_path / "out.zarr",
        resources={"memory": "600MiB"},
        cluster={"memory": "1GiB", "dashboard": "127.0.0.1:0"},
    ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert not overlapping(intervals(ds)), intervals(ds)


@pytest.mark.slow
def test_without_resources_memory_the_ask_is_learned_from_the_first_points(tmp_path):
    out = tmp_path / "out.zarr"
    ds = Sweep(
        f"{JOBS}:allocate",
        {"grid": {"x": list(range(6))}, "fixed": {"mb": 300, "hold": 1.0}},
        output=out,
        cluster={"memory": "700MiB", "dashboard": "127.0.0.1:0"},
    ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    ask = json.loads(ds.attrs["sweep_memory_ask"])
    peak = int(ds["peak_rss"].values.max())
    assert 300 * MIB < ask["bytes"] <= 700 * MIB and ask["learned_from"] >= 1
    assert ask["bytes"] >= peak  # the largest peak seen by the time it was learned, with a margin
    by_start = sorted(range(6), key=lambda i: ds["started"].values[i])
    later = sorted(intervals(ds.isel(x=by_start[2:])))  # submitted once the ask was learned
    assert not overlapping(later), later
    status = cli("status", str(out))
    assert "points asked" in status.stdout and "peak RSS" in status.stdout, status.stdout


def validate(tmp_path, ask: str, cluster: dict):
    """``sweep validate`` of a one-point recipe whose points ask ``ask`` on ``cluster``."""
    recipe = write_recipe(
        tmp_path / "r.yaml",
        job="noop",
        params={"grid": {"x": [0]}},
        resources={"memory": ask},
        cluster=cluster,
        output=tmp_path / "out.zarr",
    )
    return cli("validate", str(recipe))


def test_a_point_asking_more_memory_than_any_worker_has_is_refused_at_validate(tmp_path):
    out = validate(tmp_path, "64GiB", {"memory": "8GiB"})
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "resources.memory=64.00 GiB" in lines[0] and "offers 8.00 GiB" in lines[0]


def test_validate_says_how_many_points_run_at_once_and_what_limits_them(tmp_path):
    out = validate(tmp_path, "600MiB", {"memory": "1GiB", "threads": 2})
    assert out.returncode == 0, out.stderr
    assert "1 point of 1 core and 600.00 MiB at a time, limited by memory" in out.stdout, out.stdout


def test_a_point_asking_more_than_any_worker_of_a_given_client_offers_is_refused(client, tmp_path):
    from sweep.cluster.clusters import ClusterError

    s = Sweep(f"{JOBS}:noop", {"grid": {"x": [0]}}, output=tmp_path / "o.zarr", resources={"memory": "64TiB"})
    with pytest.raises(ClusterError, match=r"resources.memory=64.00 TiB but the largest worker of .* offers"):
        s.run(client=client, progress=False)


LIGHT_JOB = """\
import numpy as np


def light(x):
    block = np.ones((4 << 20) // 8)  # 4 MiB
    return {"v": float(block.sum() * x)}
"""


def test_a_job_without_jax_is_not_charged_with_a_prewarmed_jax(client, tmp_path):
    """Found: a warm child had imported JAX (~125 MiB) before a job that never uses it, which
    then read ``oom`` against a limit its own memory was far under."""
    from sweep.model.job import may_use_jax, parse_job

    path = tmp_path / "light.py"
    path.write_text(LIGHT_JOB)
    assert not may_use_jax(parse_job(f"{path}:light"))
    assert may_use_jax(parse_job(f"{JOBS}:jax_grad"))
    grid = {"grid": {"x": [1, 2, 3, 4]}}
    s = Sweep(f"{path}:light", grid, resources={"memory": "100MiB"}, output=tmp_path / "l.zarr")
    ds = s.run(client=client, progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert int(ds["peak_rss"].max()) < 100 * 2**20
