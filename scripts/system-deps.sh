#!/usr/bin/env bash
# System packages some tests need: Debian's SLURM (tests/test_slurm.py) and Chromium
# (tests/test_browser.py). Installed when running as root with apt-get (as CI does);
# elsewhere this says what is missing and those tests skip.
set -euo pipefail
need=()
command -v slurmctld >/dev/null || need+=(slurmctld slurmd slurm-client munge)
command -v chromium >/dev/null || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "note: not installing ${need[*]} (needs root and apt-get); their tests will be skipped" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
