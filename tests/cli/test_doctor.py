"""`sweep doctor` measures real children on this node."""

import json
import os

import pytest

from sweep.cli import doctor
from sweep.cli.app import main
from sweep.cluster.clusters import local_cores
from sweep.model import limits
from sweep.worker import leases


def test_predicted_uncapped_threads_follow_the_measured_table():
    # docs/threads.md, "with a jax.random workload": 21, 94, 302, 878 threads
    for cpus, measured in ((2, 21), (16, 94), (64, 302), (256, 878)):
        assert abs(limits.uncapped_threads(cpus) - measured) <= 6


def test_plan_counts_jobs_per_node_and_dask():
    p = limits.plan(cores=128, k=4, capped=True, budget=30)
    assert (p.jobs, p.per_job) == (32, 30) and p.total == 32 * 30 + limits.DASK_THREADS + 128
    assert limits.plan(cores=128, k=1, capped=False, budget=15).per_job == limits.uncapped_threads(128)


@pytest.mark.slow
def test_doctor_json_reports_measured_children_and_core_leases(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_LEASE_DIR", str(tmp_path))
    held = leases.NodeLocks().hold(sorted(os.sched_getaffinity(0))[-1:], 1, "sweep demo point (3,)")
    assert main(["doctor", "--json"]) == 0
    held.release()
    report = json.loads(capsys.readouterr().out)
    (cpu, who), *_ = report["core_leases"]["held"].items()
    assert int(cpu) == held.cores[0] and f"pid {os.getpid()}" in who and "sweep demo point (3,)" in who
    m = report["measured_threads"]
    assert m["capped_k1"] <= 17
    if local_cores() >= 2:
        assert m["uncapped"] > m["capped_k1"] and m["capped_k2"] <= 20
    assert report["affinity"] and "soft" in report["ulimit_u"] and report["verdict"].startswith("OK")
    assert set(report["jobs_that_fit_under_ulimit"]) == {"capped_k1", "uncapped_k1"}
    mem = report["memory"]
    assert mem["total"] >= mem["available"] > mem["local_offer"] >= 0
    imports = report["child_imports"]
    assert 0 < imports["ml_dtypes_s"] < imports["import_jax_s"] and imports["ml_dtypes"][0].isdigit()


def _verdict_with_ml_dtypes(seconds: float) -> str:
    report = {
        "measured_threads": {"capped_k1": 15},
        "is_root": False,
        "child_imports": {"import_jax_s": 0.4 + seconds, "ml_dtypes_s": seconds, "ml_dtypes": "0.7.0"},
    }
    return doctor._verdict(report, 2, None, {"capped_k1": None, "uncapped_k1": None})


def test_verdict_names_an_ml_dtypes_that_loads_slowly_and_how_to_avoid_it():
    slow = _verdict_with_ml_dtypes(0.54)
    assert slow.startswith("OK") and "0.54 s of its import jax loading ml_dtypes 0.7.0" in slow
    assert "pip install 'ml_dtypes<0.7'" in slow
    assert "ml_dtypes" not in _verdict_with_ml_dtypes(0.01)
