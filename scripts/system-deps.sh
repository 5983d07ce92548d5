#!/usr/bin/env bash
# System packages some tests need: Debian's SLURM (tests/cluster/test_slurm.py), Son of Grid
# Engine (tests/cluster/test_sge.py), Chromium
# (tests/cluster/test_browser.py), Open MPI (tests/worker/test_mpi.py) and serial Meep with MPB and
# matplotlib (python3-meep: the Meep leg of `make test`, scripts/meep-env.sh). Installed when
# running as root with apt-get (as CI does); elsewhere this says what is missing and those
# tests skip. Meep's MPI build (python3-meep-mpi-default) conflicts with python3-meep and
# lacks MPB: where it is installed, it is left alone and the Meep leg is skipped (the MPI
# Meep leg unpacks its own copy: scripts/meep-mpi-env.sh).
set -euo pipefail
need=()
command -v slurmctld >/dev/null || need+=(slurmctld slurmd slurm-client munge)
command -v chromium >/dev/null || need+=(chromium)
command -v mpirun >/dev/null || need+=(openmpi-bin)
command -v sge_qmaster >/dev/null || need+=(gridengine-master gridengine-exec gridengine-client)
if ! dpkg -s python3-meep python3-matplotlib >/dev/null 2>&1 && ! dpkg -s python3-meep-mpi-default >/dev/null 2>&1; then
    need+=(python3-meep python3-matplotlib)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "note: not installing ${need[*]} (needs root and apt-get); their tests will be skipped" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# Grid Engine's packages are told not to make a cell of their own: scripts/sge-local.sh makes
# one per run, in a folder of its own
for pkg in gridengine-master gridengine-common gridengine-client; do
    printf '%s shared/gridenginemaster string sgehost\n%s shared/gridenginecell string default\n%s shared/gridengineconfig boolean false\n' \
        "$pkg" "$pkg" "$pkg"
done | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
