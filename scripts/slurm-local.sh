#!/usr/bin/env bash
# A single-node SLURM on this machine, listening on 127.0.0.1 only, for trying sweep's
# `kind: slurm` and for its tests. Needs root and Debian's packages (installed on first use).
#
#   scripts/slurm-local.sh start    # install if needed, write the config, start munge+slurm
#   scripts/slurm-local.sh stop     # stop the daemons
#   scripts/slurm-local.sh env      # print `export SLURM_CONF=...` for clients
#
# State, spool and logs live in $SWEEP_SLURM_DIR (default /tmp/sweep-slurm).
set -euo pipefail

DIR=${SWEEP_SLURM_DIR:-/tmp/sweep-slurm}
CONF=$DIR/slurm.conf

# shellcheck source=scripts/slurm-packages.sh
. "$(dirname "$0")/slurm-packages.sh"

write_conf() {
    mkdir -p "$DIR"/{state,spool,log}
    local cpus mem
    cpus=$(getconf _NPROCESSORS_ONLN)  # not nproc: it honours OMP_NUM_THREADS
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
    cat >"$CONF" <<CONF
ClusterName=sweep
SlurmctldHost=localhost(127.0.0.1)
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MpiDefault=none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
}

# a live process named $1 (see alive)
running() {
    local pid
    for pid in $(pgrep -x "$1"); do alive "$pid" && return 0; done
    return 1
}

start() {
    install
    write_conf
    mkdir -p /run/munge && chown munge:munge /run/munge
    running munged || runuser -u munge -- /usr/sbin/munged
    running slurmctld || slurmctld -f "$CONF"
    running slurmd || slurmd -f "$CONF" -N localhost
    for _ in $(seq 1 60); do
        # up: the node answers, idle or running others' jobs (a second test run, a user's sweep)
        if SLURM_CONF=$CONF sinfo -h -o %t 2>/dev/null | grep -qxE 'idle|mix|alloc'; then
            echo "slurm is up: export SLURM_CONF=$CONF"
            return 0
        fi
        SLURM_CONF=$CONF scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true
        sleep 1
    done
    echo "slurm did not become idle; see $DIR/log" >&2
    SLURM_CONF=$CONF sinfo >&2 || true
    return 1
}

# this SLURM's step daemons: those in this network namespace (the multi-node cluster's
# run in its nodes' own)
own_stepds() {
    local pid here
    here=$(readlink /proc/self/ns/net)
    for pid in $(pgrep -x slurmstepd); do
        [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$here" ] && echo "$pid"
    done
    return 0
}

# SIGTERM, then SIGKILL after STOP_GRACE_S: a slurmd whose step daemon waits on a job that won't
# end (its processes zombies, where PID 1 reaps late) stays in its shutdown for as long as that
# step retries its RPCs to the slurmctld stopped beside it, and a start meanwhile would find
# it running and start none
STOP_GRACE_S=5
stop() {
    pkill -x slurmd || true
    pkill -x slurmctld || true
    pkill -x munged || true
    for i in $(seq 1 100); do  # gone when stop returns: a start right after finds none running
        running slurmd || running slurmctld || running munged || return 0
        if [ "$i" -eq $((STOP_GRACE_S * 10)) ]; then
            pkill -9 -x slurmd || true
            pkill -9 -x slurmctld || true
            pkill -9 -x munged || true
            for pid in $(own_stepds); do kill -9 "$pid" 2>/dev/null || true; done
        fi
        sleep 0.1
    done
    echo "slurm daemons still running 10 s after stop" >&2
    return 1
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
