"""Walltime-aware placement: when a batch job ends, and whether a point still fits."""

import pytest

from sweep.model import backends
from sweep.worker import batchjob


@pytest.mark.parametrize(
    ("kind", "given", "seconds"),
    [
        ("slurm", "01:00:00", 3600),
        ("slurm", "1-02:00:00", 93600),
        ("slurm", "2-12", 216000),
        ("slurm", "30", 1800),  # SLURM reads a bare number as minutes
        ("slurm", "05:30", 330),  # and two parts as minutes:seconds
        ("pbs", "00:20:00", 1200),
        ("pbs", 90, 90),
        ("lsf", "01:30", 5400),  # LSF reads two parts as hours:minutes
        ("lsf", "45", 2700),
        ("sge", "3600", 3600),
        ("htcondor", "01:00:00", None),
        ("slurm", "soon", None),
        ("slurm", None, None),
    ],
)
def test_walltimes_are_read_as_each_batch_system_reads_them(kind, given, seconds):
    assert backends.walltime_seconds(kind, given) == seconds


def test_the_job_end_comes_from_the_job_scripts_variable():
    assert batchjob.job_end({"SWEEP_JOB_END": "1700000000"}) == 1_700_000_000
    assert batchjob.job_end({}) is None
    assert batchjob.job_end({"SWEEP_JOB_END": ""}) is None


def test_a_point_fits_when_it_ends_a_margin_before_the_job():
    end = 1000.0
    assert batchjob.fits(40, end, now=end - 40 - batchjob.MARGIN_S)
    assert not batchjob.fits(40, end, now=end - 40 - batchjob.MARGIN_S + 1)
    assert batchjob.fits(None, end, now=end) and batchjob.fits(40, None, now=0)


def test_the_estimate_is_the_longest_of_few_points_then_the_90th_percentile():
    assert batchjob.estimate([]) is None
    assert batchjob.estimate([3.0, float("nan"), 5.0, 4.0]) == 5.0
    assert batchjob.estimate([float(i) for i in range(1, 101)]) == 90.0


def test_a_job_slurm_requeued_and_ran_again_is_a_new_run_of_its_id():
    assert batchjob.batch_job_id({"SLURM_JOB_ID": "15", "SLURM_RESTART_COUNT": "0"}) == "15"
    assert batchjob.batch_job_id({"SLURM_JOB_ID": "15", "SLURM_RESTART_COUNT": "2"}) == "15 (restart 2)"
    # a restart count is SLURM's alone: another scheduler's id is never decorated by it
    assert batchjob.batch_job_id({"PBS_JOBID": "7.pbs01", "SLURM_RESTART_COUNT": "1"}) == "7.pbs01"
