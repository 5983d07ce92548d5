# Sourced by scripts/slurm-local.sh and scripts/slurm-nodes.sh: Debian's SLURM and munge,
# installed on first use, and how both tell a live daemon from a dead one.
install() {
    command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null && return
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
}

# whether process $1 lives: `kill -0` and `pgrep` also find a killed daemon's zombie where
# PID 1 reaps no orphans (some containers), so a stop would wait for it and a start skip it
alive() {
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null || true)
    [ -n "$state" ] && [ "${state:0:1}" != Z ]
}
