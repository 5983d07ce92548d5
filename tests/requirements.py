"""What a heavy test needs of the machine, by marker: a test marked ``@pytest.mark.slurm`` (or
``root``, ``nodes``, ``sge``, ``browser``, ``meep``, ``mpi_meep``, ``mpirun``, ``gcc``) is
skipped, with the reason, where the machine lacks it (tests/conftest.py applies it);
``-m "not slurm"`` leaves such tests out on purpose."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@cache
def _mpi_meep() -> bool:
    if importlib.util.find_spec("meep") is None:
        return False
    code = "import meep; print(meep.with_mpi())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return "True" in out.stdout.split()


def _slurm_installable() -> bool:
    return bool(shutil.which("slurmctld") or shutil.which("apt-get"))


@cache
def _namespaces() -> bool:
    """Root, and a network namespace of its own where a bridge can be made (as
    scripts/slurm-nodes.sh does); tried in a throwaway namespace, nothing on the machine changes."""
    if os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("unshare") and shutil.which("nsenter")):
        return False
    probe = "ip link add sw-probe type bridge && ip link set sw-probe up"
    try:
        out = subprocess.run(
            ["unshare", "--net", "--uts", "--mount", "sh", "-c", probe], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


# marker: (whether the machine has it, the reason given when it doesn't)
NEEDS: dict[str, tuple[Callable[[], bool], str]] = {
    "root": (lambda: os.geteuid() == 0, "needs root"),
    "slurm": (
        lambda: os.geteuid() == 0 and _slurm_installable(),
        "starting SLURM needs root, and SLURM or apt-get",
    ),
    "nodes": (
        lambda: _namespaces() and _slurm_installable(),
        "a multi-node SLURM needs root, network/UTS/mount namespaces, and SLURM or apt-get",
    ),
    "sge": (
        lambda: _namespaces() and bool(shutil.which("sge_qmaster") or shutil.which("apt-get")),
        "Grid Engine needs root, network/UTS/mount namespaces, and its Debian packages or apt-get",
    ),
    "browser": (lambda: Path(CHROMIUM).exists(), "needs Debian's chromium (scripts/system-deps.sh)"),
    "meep": (
        lambda: importlib.util.find_spec("meep") is not None,
        "needs Meep: run in the Meep environment (make meep-env)",
    ),
    "mpi_meep": (_mpi_meep, "needs Meep's MPI build (scripts/meep-mpi-env.sh)"),
    "mpirun": (lambda: shutil.which("mpirun") is not None, "needs Open MPI's mpirun"),
    "gcc": (lambda: bool(shutil.which("gcc") and shutil.which("runuser")), "needs gcc and runuser"),
}
