"""Nothing hangs: the k=1 host-callback deadlock is gone, and a job that stalls is killed.

Real spawned children on real cores, no Dask (issue: nothing hangs at scale)."""

import threading

import pytest

from sweep.model.job import parse_job
from sweep.wire.childconfig import JAX_CONFIG_VAR, ChildConfig
from sweep.wire.task import Limits
from sweep.worker.child import Child
from tests.helpers import job

# one XLA thread with JAX's asynchronous dispatch: the setting that deadlocked
OLD_SETTING = ChildConfig(cap=True, env=(("NPROC", "1"), ("PJRT_NPROC", "1"), (JAX_CONFIG_VAR, "")))


def run_on_both_cores(config: ChildConfig, runs: int, limits: Limits, until_stall: bool = False) -> list:
    """``runs`` callback_update jobs at k = 1, two side by side (one per core); with
    ``until_stall``, no new job starts once one has stalled."""
    records: list = []

    def serve(core: int) -> None:
        for _ in range(runs // 2):
            if until_stall and any(r.status == "stalled" for r in records):
                return
            child = Child([core], config)
            try:
                records.append(child.run(parse_job(job("callback_update")), {}, limits=limits))
            finally:
                child.kill()

    threads = [threading.Thread(target=serve, args=(c,)) for c in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


LIMITS = Limits(stall=5.0, timeout=120.0)


@pytest.mark.slow
def test_host_callbacks_never_deadlock_with_the_childs_setting():
    """Found: invrs-opt's L-BFGS-B callback hung 6 of 11 runs pinned to one core with
    NPROC=PJRT_NPROC=1: the callback waited on the copy of its operands, queued behind its own
    computation on XLA's one pool thread. With the child's setting (one XLA thread, each
    computation run on the thread that calls it) the same pattern, self-contained, never
    stalls, and the child holds the threads of one XLA thread, not two."""
    now = run_on_both_cores(ChildConfig(cap=True), 12, LIMITS)
    assert [r.status for r in now] == ["done"] * 12, [(r.status, r.error[:80]) for r in now]
    assert all(r.peak_threads <= 15 for r in now), [r.peak_threads for r in now]


@pytest.mark.slow
def test_the_old_one_thread_setting_is_seen_to_deadlock():
    """The check above can see a deadlock: with the old setting the pattern stalls and the
    watchdog says so. The hang is a race (6 of 11 runs where it was found, none in 4 on
    another machine), so up to 16 runs are tried; if none hangs the test skips, saying so,
    rather than pass on a reproduction it did not make."""
    old = run_on_both_cores(OLD_SETTING, 16, LIMITS, until_stall=True)
    assert all(r.status in ("done", "stalled") for r in old), [(r.status, r.error[:80]) for r in old]
    stalled = [r for r in old if r.status == "stalled"]
    if not stalled:
        pytest.skip(f"the one-thread deadlock did not occur in {len(old)} runs on this machine")
    assert "no CPU time for" in stalled[0].error, stalled[0].error


def run_alone(name: str, kwargs: dict, limits: Limits):
    """One job in a fresh capped child on core 0; the record, and the child (killed)."""
    child = Child([0], ChildConfig(cap=True))
    try:
        return child.run(parse_job(job(name)), kwargs, limits=limits), child
    finally:
        child.kill()


@pytest.mark.slow
def test_a_job_without_cpu_for_the_stall_time_is_killed_with_its_stacks():
    out, child = run_alone("sleepy", {"x": 1, "seconds": 120}, Limits(stall=1.5))
    assert out.status == "stalled" and "no CPU time for" in out.error and "resources.stall" in out.error
    assert out.wall_s < 30
    assert "in sleepy" in out.output_tail and "thread 0x" in out.output_tail, out.output_tail
    assert not child.alive()


@pytest.mark.slow
def test_a_busy_job_is_not_stalled():
    out, _ = run_alone("busy", {"x": 0, "seconds": 3.0}, Limits(stall=1.0))
    assert out.status == "done", out.error
