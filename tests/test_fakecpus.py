"""tests/fakecpus.c, the preload that makes a small machine look like a big node."""

import os
import subprocess
import sys

from tests.helpers import fakecpus_library


def test_an_unpinned_process_sees_every_fake_cpu_past_the_first_buffer_of_64(tmp_path):
    """Python asks for 64 CPUs' worth of mask first and grows it only when told EINVAL."""
    lib = fakecpus_library(tmp_path)
    env = {**os.environ, "LD_PRELOAD": str(lib), "FAKE_NCPUS": "128"}
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(len(os.sched_getaffinity(0)))"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "128"
