"""The chaos soak (benchmarks/soak.py) for 3 minutes, seed pinned: faults at random on the
multi-node SLURM, then every point done once with its clean value and nothing left behind."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.nodes]


def test_a_three_minute_soak_ends_with_every_point_done_at_its_clean_value():
    soak = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--minutes", "3", "--seed", "7"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert soak.returncode == 0, soak.stdout[-4000:] + soak.stderr[-4000:]
    assert '"problems": []' in soak.stdout, soak.stdout[-4000:]
