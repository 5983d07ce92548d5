"""The batch system's warning of a job's end (sweep.worker.endsignal): the job script asks for
it; the real warning on a multi-node SLURM is in tests/cluster/test_nodes.py."""

import os
import signal
import subprocess
import sys
import threading
import time

from sweep.worker.endsignal import IGNORE_LINE, MIN_WALLTIME_S, handles, job_script_options, retire_on_signal


def test_a_slurm_job_of_a_long_walltime_is_warned_and_its_worker_execd():
    opts = {"job_script_prologue": ["module load x"]}
    job_script_options("slurm", opts, "/venv/bin/python", MIN_WALLTIME_S)
    assert opts == {
        "job_extra_directives": ["--signal=B:USR1@120"],
        "job_script_prologue": [IGNORE_LINE, "module load x"],
        "python": "exec /venv/bin/python",
    }


def test_a_short_walltime_is_not_warned_and_a_recipes_own_signal_is_kept():
    short: dict = {}
    job_script_options("slurm", short, "python", MIN_WALLTIME_S - 1)
    assert "job_extra_directives" not in short and short["python"] == "exec python"
    own = {"job_extra_directives": ["--signal=B:USR1@300"], "python": "exec /opt/py"}
    job_script_options("slurm", own, "python", 3600)
    assert own["job_extra_directives"] == ["--signal=B:USR1@300"] and own["python"] == "exec /opt/py"


def test_a_batch_system_without_the_warning_is_left_as_it_is():
    opts = {"python": "/venv/bin/python"}
    job_script_options("pbs", opts, "python", 3600)
    assert opts == {"python": "/venv/bin/python"}


class Loop:
    def __init__(self) -> None:
        self.called = threading.Event()
        self.args: tuple = ()

    def add_callback(self, fn, *args) -> None:
        self.args = (fn, *args)
        self.called.set()


class Retiring:
    """What retire_on_signal uses of a Retirement: its worker's loop, its retire."""

    def __init__(self) -> None:
        self.worker, self.address = type("W", (), {"loop": Loop()})(), "tls://w"

    def retire(self, why: str) -> None: ...


def test_the_warning_schedules_the_workers_retirement_on_its_loop():
    before = signal.getsignal(signal.SIGUSR1)
    retiring = Retiring()
    try:
        retire_on_signal(retiring)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert retiring.worker.loop.called.wait(5)
    finally:
        signal.signal(signal.SIGUSR1, before)
    fn, why = retiring.worker.loop.args
    assert fn == retiring.retire and "signalled (SIGUSR1)" in why


def test_a_process_that_would_die_of_the_signal_is_not_sent_it():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ignoring = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGUSR1, signal.SIG_IGN); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not handles(ignoring.pid, signal.SIGUSR1):
            assert time.monotonic() < deadline, "the ignoring child never ignored SIGUSR1"
            time.sleep(0.05)
        assert not handles(child.pid, signal.SIGUSR1)
    finally:
        child.kill()
        ignoring.kill()
        child.wait()
        ignoring.wait()
    assert not handles(child.pid, signal.SIGUSR1)  # gone
