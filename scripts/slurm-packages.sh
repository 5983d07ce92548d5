# Sourced by scripts/slurm-local.sh and scripts/slurm-nodes.sh: Debian's SLURM and munge,
# installed on first use.
install() {
    command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null && return
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
}
