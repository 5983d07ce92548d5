"""The multi-node SLURM of tests/cluster/test_nodes.py (scripts/slurm-nodes.sh), started once per
session where the machine allows it (the ``nodes`` marker: root and namespaces) and stopped at
the end, leaving no process, namespace or link behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT, alive

NODES_SCRIPT = ROOT / "scripts" / "slurm-nodes.sh"


@dataclass(frozen=True)
class Nodes:
    """A running multi-node SLURM: its config, the bridge workers reach the scheduler on, its
    node names, and the folder it keeps everything in."""

    conf: Path
    interface: str
    names: tuple[str, ...]
    folder: Path

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``scripts/slurm-nodes.sh ARGS`` on this cluster (kill, revive, cut, heal, on)."""
        env = {**os.environ, "SWEEP_NODES_DIR": str(self.folder)}
        done = subprocess.run(
            [str(NODES_SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert not check or done.returncode == 0, f"slurm-nodes.sh {' '.join(args)}: {done.stderr}"
        return done


def _daemons(folder: Path) -> list[int]:
    """The PIDs of the cluster's daemons (slurmctld, munged, each slurmd), from its PID files."""
    return [int(p.read_text()) for p in (folder / "run").glob("*.pid") if p.read_text().strip().isdigit()]


def _left_behind(instance: str, daemons: list[int]) -> list[str]:
    """The namespaces, links and daemons of cluster ``instance`` still on the machine."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    prefix = f"sw{instance}-"
    found = [line.split()[0] for line in netns.splitlines() if line.startswith(prefix)]
    found += [
        f.split(":")[1].strip().split("@")[0]
        for f in links.splitlines()
        if prefix in f or f": sw-br{instance}:" in f
    ]
    # a killed daemon's zombie is not left behind: a PID 1 that reaps orphans late (some
    # containers) keeps it a while
    return found + [f"process {pid}" for pid in daemons if alive(pid)]


@pytest.fixture(scope="session")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    """3 SLURM nodes of 16 CPUs in namespaces of their own, for this session alone (its own
    bridge, munged and config: beside other test runs and the single-node SLURM). A test
    points SLURM's commands at it with ``SLURM_CONF`` (tests/cluster/test_nodes.py does)."""
    folder = tmp_path_factory.mktemp("nodes")
    env = {**os.environ, "SWEEP_NODES_DIR": str(folder)}
    up = subprocess.run([str(NODES_SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        subprocess.run([str(NODES_SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
        pytest.fail(f"could not start the multi-node SLURM:\n{up.stdout}\n{up.stderr}")
    instance = (folder / "instance").read_text().strip()
    count = int((folder / "nodes").read_text())
    try:
        yield Nodes(
            folder / "slurm.conf", f"sw-br{instance}", tuple(f"node{i}" for i in range(1, count + 1)), folder
        )
    finally:
        daemons = _daemons(folder)
        subprocess.run([str(NODES_SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
    left = _left_behind(instance, daemons)
    assert not left, f"the multi-node SLURM left {left} behind"
