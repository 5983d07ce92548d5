#!/usr/bin/env bash
# A multi-node SLURM on this machine: each compute node is a slurmd in network, UTS and mount
# namespaces of its own, with its own hostname and address on a private bridge that exists only
# on this machine; slurmctld listens on the bridge address only. For sweep's multi-node tests
# (tests/cluster/test_nodes.py) and for trying node loss, preemption and walltime by hand.
# Needs root, namespaces and Debian's SLURM packages (scripts/system-deps.sh).
#
#   scripts/slurm-nodes.sh start         # 3 nodes x 16 CPUs ($SWEEP_NODES, $SWEEP_NODE_CPUS)
#   scripts/slurm-nodes.sh env           # export SLURM_CONF=...; the bridge for `interface:`
#   scripts/slurm-nodes.sh kill NODE     # SIGKILL everything on NODE, mark it DOWN at once
#   scripts/slurm-nodes.sh revive NODE   # start NODE's slurmd again and resume it
#   scripts/slurm-nodes.sh cut NODE      # take NODE off the network (its jobs keep running)
#   scripts/slurm-nodes.sh heal NODE     # put it back
#   scripts/slurm-nodes.sh on NODE CMD.. # run CMD on NODE (its network, hostname, /etc/hosts)
#   scripts/slurm-nodes.sh stop          # stop everything it started, by PID; remove the
#                                        # namespaces, links and bridge
#
# Everything lives in $SWEEP_NODES_DIR (default /tmp/sweep-nodes): config, state, logs, PID
# files. Each cluster takes the first free bridge sw-br<N> and subnet 10.231.N.0/24, so
# several can run at once (two test runs) beside the single-node scripts/slurm-local.sh:
# its own munged (own key and socket), daemons under their own process names (sw-slurmctld,
# sw-slurmd, sw-munged: `pgrep -x slurmctld` never finds them) and slurmctld bound to the
# bridge address only (port 6817 there, never 127.0.0.1). Inside a node the network link has
# the bridge's name, so `interface: sw-br<N>` is right on the submitting host and on the nodes.
# Nodes share the whole file system, as a cluster's nodes share its shared disk.
set -euo pipefail

DIR=${SWEEP_NODES_DIR:-/tmp/sweep-nodes}
CONF=$DIR/slurm.conf
NODES=${SWEEP_NODES:-3}
CPUS=${SWEEP_NODE_CPUS:-16}
MEMORY_MB=${SWEEP_NODE_MEMORY_MB:-16000}

die() { echo "slurm-nodes: $*" >&2; exit 1; }

instance() { cat "$DIR/instance" 2>/dev/null || die "no cluster in $DIR (run start)"; }
bridge() { echo "sw-br$(instance)"; }
netns() { echo "sw$(instance)-$1"; }
link_of() { echo "sw$(instance)-${1#node}h"; }  # the host's end of NODE's link
node_ip() { echo "10.231.$(instance).$((10 + ${1#node}))"; }
node_names() { for i in $(seq 1 "$(cat "$DIR/nodes")"); do echo "node$i"; done; }
# no `node_names | grep -q`: grep quits at the first match, node_names dies of SIGPIPE, and
# pipefail turns the match into a failure, now and then
known_node() {
    local names
    names=" $(node_names | tr '\n' ' ')"
    case "$names" in *" $1 "*) ;; *) die "no node '$1' (nodes:$names)" ;; esac
}
ctl() { SLURM_CONF=$CONF "$@"; }

# shellcheck source=scripts/slurm-packages.sh
. "$(dirname "$0")/slurm-packages.sh"

# the first free N: `ip link add` of sw-br<N> is atomic, so two starts never share one
claim_bridge() {
    for n in $(seq 1 250); do
        if ip link add "sw-br$n" type bridge 2>/dev/null; then
            echo "$n" >"$DIR/instance"
            ip addr add "10.231.$n.1/24" dev "sw-br$n"
            ip link set "sw-br$n" up
            return 0
        fi
    done
    die "no free bridge sw-br1..250"
}

write_conf() {
    local n=$1 names
    names=$(node_names | paste -sd, -)
    cat >"$CONF" <<CONF
ClusterName=sw$n
SlurmctldHost=controller(10.231.$n.1)
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/socket,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core,CR_LLN
SchedulerType=sched/backfill
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
ReturnToService=1
SlurmdTimeout=10
KillWait=10
MinJobAge=60
InactiveLimit=0
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
CONF
    for node in $(node_names); do
        echo "NodeName=$node NodeAddr=$(node_ip "$node") CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN" >>"$CONF"
    done
    cat >>"$CONF" <<CONF
PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=$names MaxTime=INFINITE State=UP PriorityTier=2
CONF
    {
        echo "127.0.0.1 localhost"
        echo "10.231.$n.1 controller"
        for node in $(node_names); do echo "$(node_ip "$node") $node"; done
    } >"$DIR/hosts"
}

start_munge() {
    mkdir -p "$DIR/munge" && chmod 0755 "$DIR/munge"
    [ -f "$DIR/munge/key" ] || { head -c 1024 /dev/urandom >"$DIR/munge/key"; chmod 0400 "$DIR/munge/key"; }
    "$DIR/bin/sw-munged" --force --socket="$DIR/munge/socket" --key-file="$DIR/munge/key" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed"
}

# a node: its namespace, a veth whose inner end is named like the bridge, and its slurmd
# in its own UTS and mount namespaces (hostname, /etc/hosts)
start_node() {
    local node=$1 ns host_end
    ns=$(netns "$node")
    host_end=$(link_of "$node")
    if ! ip netns list | grep -qw "$ns"; then
        ip netns add "$ns"
        ip link add "$host_end" type veth peer name "$(bridge)" netns "$ns"
        ip link set "$host_end" master "$(bridge)" up
        ip -n "$ns" addr add "$(node_ip "$node")/24" dev "$(bridge)"
        ip -n "$ns" link set lo up
        ip -n "$ns" link set "$(bridge)" up
    fi
    mkdir -p "$DIR/spool/$node"
    # nsenter, not `ip netns exec`: that mounts a /sys of its own, without the cgroup file
    # systems slurmd reads
    nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private sh -c \
        "hostname $node && mount --bind $DIR/hosts /etc/hosts && exec $DIR/bin/sw-slurmd -f $CONF -N $node"
}

node_pid() { cat "$DIR/run/slurmd-$1.pid" 2>/dev/null || true; }

wait_idle() {
    local want=$1
    for _ in $(seq 1 120); do
        local up
        up=$(ctl sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(idle|mix|alloc)$/' | wc -l)
        [ "$up" -ge "$want" ] && return 0
        for node in $(node_names); do ctl scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true; done
        sleep 0.5
    done
    ctl sinfo -N >&2 || true
    die "nodes did not come up; see $DIR/log"
}

start() {
    [ "$(id -u)" -eq 0 ] || die "needs root (namespaces, a bridge, SLURM daemons)"
    [ -f "$DIR/instance" ] && ip link show "$(bridge)" >/dev/null 2>&1 && die "a cluster already runs in $DIR (stop it first)"
    install
    rm -rf "$DIR/state" "$DIR/run" "$DIR/spool"
    mkdir -p "$DIR"/{state,run,log,spool,bin}
    echo "$NODES" >"$DIR/nodes"
    # own process names: the single-node script's `pgrep -x`/`pkill -x` never see these
    ln -sf "$(command -v slurmctld)" "$DIR/bin/sw-slurmctld"
    ln -sf "$(command -v slurmd)" "$DIR/bin/sw-slurmd"
    ln -sf "$(command -v munged)" "$DIR/bin/sw-munged"
    claim_bridge
    write_conf "$(instance)"
    start_munge
    # its own hostname and /etc/hosts, so that it binds the bridge address (a slurmctld named
    # localhost binds 127.0.0.1, where the single-node SLURM listens)
    unshare --uts --mount --propagation private sh -c \
        "hostname controller && mount --bind $DIR/hosts /etc/hosts && exec $DIR/bin/sw-slurmctld -f $CONF"
    for node in $(node_names); do start_node "$node"; done
    wait_idle "$NODES"
    echo "slurm is up on $NODES nodes: export SLURM_CONF=$CONF; interface: $(bridge)"
}

kill_pids() {
    local pids=$1
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
}

# SIGKILL every process in NODE's network namespace and wait until they are gone
kill_everything_on() {
    local ns
    ns=$(netns "$1")
    for _ in $(seq 1 50); do
        local pids
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        [ -z "${pids// /}" ] && return 0
        kill_pids "$pids"
        sleep 0.1
    done
    die "processes on $1 would not die: $(ip netns pids "$ns" | tr '\n' ' ')"
}

kill_node() {
    local node=$1
    known_node "$node"
    kill_everything_on "$node"
    rm -f "$DIR/run/slurmd-$node.pid"
    ctl scontrol update nodename="$node" state=down reason="killed by slurm-nodes.sh" || true
}

revive_node() {
    local node=$1
    known_node "$node"
    [ -n "$(node_pid "$node")" ] && alive "$(node_pid "$node")" && die "$node is running"
    start_node "$node"
    ctl scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
}

on_node() {
    local node=$1
    shift
    known_node "$node"
    local pid
    pid=$(node_pid "$node")
    [ -n "$pid" ] || die "$node is down (revive it)"
    exec nsenter --target "$pid" --net --uts --mount -- "$@"
}

stop() {
    [ -f "$DIR/instance" ] || return 0
    local n
    n=$(instance)
    for node in $(node_names); do kill_everything_on "$node"; done
    local daemons
    daemons=$(cat "$DIR/run/slurmctld.pid" "$DIR/run/munged.pid" 2>/dev/null | tr '\n' ' ' || true)
    kill_pids "$daemons"
    for _ in $(seq 1 50); do  # gone, not just signalled, when stop returns
        local alive=""
        for pid in $daemons; do alive "$pid" && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    for node in $(node_names); do
        ip link del "$(link_of "$node")" 2>/dev/null || true
        ip netns del "$(netns "$node")" 2>/dev/null || true
    done
    ip link del "sw-br$n" 2>/dev/null || true
    rm -f "$DIR/instance" "$DIR"/run/*.pid
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    env) echo "export SLURM_CONF=$CONF; interface=$(bridge)" ;;
    kill) kill_node "${2:?node}" ;;
    revive) revive_node "${2:?node}" ;;
    cut) known_node "${2:?node}"; ip link set "$(link_of "$2")" down ;;
    heal) known_node "${2:?node}"; ip link set "$(link_of "$2")" up ;;
    on) on_node "${2:?node}" "${@:3}" ;;
    *) echo "usage: $0 start|stop|env|kill NODE|revive NODE|cut NODE|heal NODE|on NODE CMD..." >&2; exit 2 ;;
esac
