"""Each batch system is one record (sweep/capacity/backends.py), read by every module that needs it."""

import dask_jobqueue
import pytest

from sweep.capacity.backends import BACKENDS
from sweep.model.backends import gpu_directives, walltime_seconds
from sweep.worker import batchjob, endsignal


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_every_record_names_a_dask_jobqueue_class_and_a_hint(kind):
    backend = BACKENDS[kind]
    assert hasattr(dask_jobqueue, backend.job_class) and backend.hint.startswith("check that")


def test_a_job_finds_its_id_with_sges_generic_variable_looked_at_last():
    assert batchjob.JOB_ID_VARS[-1] == "JOB_ID" and "OAR_JOB_ID" in batchjob.JOB_ID_VARS
    assert (
        batchjob.batch_job_id({"SLURM_JOB_ID": "7", "SLURM_RESTART_COUNT": "2", "JOB_ID": "9"})
        == "7 (restart 2)"
    )


def test_walltimes_read_by_each_records_rules():
    assert walltime_seconds("slurm", "90") == 5400.0 and walltime_seconds("pbs", "90") == 90.0
    assert walltime_seconds("lsf", "2:30") == 9000.0 and walltime_seconds("oar", "2") == 7200.0
    assert walltime_seconds("htcondor", "01:00:00") is None


def test_gpus_are_asked_in_each_systems_syntax_or_refused_where_unknown():
    assert gpu_directives("slurm", 2, ["--exclusive"]) == ["--exclusive", "--gres=gpu:2"]
    assert gpu_directives("htcondor", 1, None) == {"request_gpus": "1"}
    with pytest.raises(ValueError, match="how oar is asked for GPUs is not known"):
        gpu_directives("oar", 1, None)


def test_only_a_system_with_an_end_signal_is_asked_to_warn():
    assert endsignal.warns("slurm") and not endsignal.warns("pbs") and not endsignal.warns("local")
    assert endsignal.directive(BACKENDS["slurm"].end_signal).startswith("--signal=B:")


def _defaults(**cluster):
    from sweep.model.backends import run_defaults
    from sweep.model.settings import ClusterSettings

    settings = ClusterSettings(**{"cores": 4, "memory": "8GiB", **cluster})
    return run_defaults(settings, "demo", "/tmp/out.zarr").jobqueue_options.get("job_extra_directives")


def test_an_sge_job_of_several_cores_asks_a_parallel_environment_unless_one_is_given():
    assert _defaults(kind="sge") == ["-pe smp 4"]
    assert _defaults(kind="sge", job_extra_directives=["-pe threaded 4"]) == ["-pe threaded 4"]
    assert _defaults(kind="sge", cores=1) is None
    assert _defaults(kind="slurm") == ["--open-mode=append"]
