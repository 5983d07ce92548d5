#!/usr/bin/env bash
# A single-node Son of Grid Engine on this machine, for sweep's Grid Engine tests
# (tests/cluster/test_sge.py) and for trying `cluster.kind: sge` by hand. Its qmaster and
# execd run in network, UTS and mount namespaces of their own: hostname `sgehost`, a private
# address on the loopback link that exists only inside them, their own /etc/hosts, and ports 6444
# and 6445 there, so several can run at once and nothing listens outside. Its SGE_ROOT and
# cell, spool and logs live in $SWEEP_SGE_DIR (default /tmp/sweep-sge); the binaries are
# Debian's (gridengine-master, gridengine-exec, gridengine-client: scripts/system-deps.sh).
# Needs root and namespaces. Commands that talk to it (qsub, qstat, `sweep submit`) run
# inside through `on`: the submitting host is the execution host, as on a one-node cluster.
#
#   scripts/sge-local.sh start            # one host, $SWEEP_SGE_SLOTS slots (default 4),
#                                         # queue sweep.q, parallel environment smp
#   scripts/sge-local.sh on CMD...        # run CMD inside (SGE_ROOT, SGE_CELL set)
#   scripts/sge-local.sh env              # export SGE_ROOT=...; export SGE_CELL=...
#   scripts/sge-local.sh stop             # SIGKILL everything inside, remove the namespace
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin  # sge_qmaster, ip: not on every root's PATH

DIR=${SWEEP_SGE_DIR:-/tmp/sweep-sge}
SLOTS=${SWEEP_SGE_SLOTS:-4}
HOST=sgehost
ADDR=10.232.0.1
ROOT=$DIR/root
CELL=default
COMMON=$ROOT/$CELL/common

die() { echo "sge-local: $*" >&2; exit 1; }
netns() { cat "$DIR/netns" 2>/dev/null || die "no Grid Engine in $DIR (run start)"; }

on() {
    local ns
    ns=$(netns)
    SGE_ROOT=$ROOT SGE_CELL=$CELL SGE_QMASTER_PORT=6444 SGE_EXECD_PORT=6445 \
        nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private \
        sh -c 'hostname '"$HOST"' && mount --bind "$0"/hosts /etc/hosts && exec "$@"' "$DIR" "$@"
}

# the first free sw-sge<N>: `ip netns add` fails for a name that exists, so two starts never share one
claim_netns() {
    for n in $(seq 1 250); do
        if ip netns add "sw-sge$n" 2>/dev/null; then
            echo "sw-sge$n" >"$DIR/netns"
            ip -n "sw-sge$n" link set lo up
            ip -n "sw-sge$n" addr add "$ADDR/32" dev lo
            return 0
        fi
    done
    die "no free network namespace sw-sge1..250"
}

write_cell() {
    mkdir -p "$COMMON" "$DIR/spool/qmaster" "$DIR/spool/execd"
    for d in bin lib utilbin util; do ln -sfn "/var/lib/gridengine/$d" "$ROOT/$d"; done
    printf '127.0.0.1 localhost\n%s %s\n' "$ADDR" "$HOST" >"$DIR/hosts"
    echo "$HOST" >"$COMMON/act_qmaster"
    echo "sweep" >"$COMMON/cluster_name"
    cat >"$COMMON/bootstrap" <<CONF
admin_user              none
default_domain          none
ignore_fqdn             true
spooling_method         classic
spooling_lib            libspoolc
spooling_params         $COMMON;$DIR/spool/qmaster
binary_path             /usr/sbin
qmaster_spool_dir       $DIR/spool/qmaster
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
CONF
    sed -e "s|^execd_spool_dir .*|execd_spool_dir        $DIR/spool/execd|" \
        -e 's|^mailer .*|mailer                 /bin/true|' \
        -e 's|^min_uid .*|min_uid                0|' -e 's|^min_gid .*|min_gid                0|' \
        -e 's|^load_report_time .*|load_report_time       00:00:05|' \
        -e 's|^max_unheard .*|max_unheard            00:00:30|' \
        -e 's|^reporting_params .*|reporting_params       accounting=true reporting=false flush_time=00:00:01 accounting_flush_time=00:00:00 joblog=false sharelog=00:00:00|' \
        /usr/share/gridengine/default-configuration >"$DIR/global.conf"
    on /usr/lib/gridengine/spoolinit classic libspoolc "$COMMON;$DIR/spool/qmaster" init
    on /usr/lib/gridengine/spooldefaults configuration "$DIR/global.conf"
    on /usr/lib/gridengine/spooldefaults complexes /usr/share/gridengine/util/resources/centry
    on /usr/lib/gridengine/spooldefaults usersets /usr/share/gridengine/util/resources/usersets
    on /usr/lib/gridengine/spooldefaults managers root
    on /usr/lib/gridengine/spooldefaults adminhosts "$HOST" 2>/dev/null || true
}

# what `qconf` is given: the host as execution and submit host, queue sweep.q with SLOTS
# slots and the parallel environment smp (k slots on one host), a scheduler run every second
configure() {
    local t=$DIR/conf
    mkdir -p "$t"
    printf 'hostname %s\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' "$HOST" >"$t/host"
    cat >"$t/pe" <<CONF
pe_name            smp
slots              9999
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    \$pe_slots
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
CONF
    cat >"$t/queue" <<CONF
qname                 sweep.q
hostlist              $HOST
seq_no                0
load_thresholds       NONE
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:00:01
priority              0
min_cpu_interval      00:00:01
processors            UNDEFINED
qtype                 BATCH INTERACTIVE
ckpt_list             NONE
pe_list               smp
rerun                 FALSE
slots                 $SLOTS
tmpdir                /tmp
shell                 /bin/bash
prolog                NONE
epilog                NONE
shell_start_mode      unix_behavior
starter_method        NONE
suspend_method        NONE
resume_method         NONE
terminate_method      NONE
notify                00:00:10
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      NONE
complex_values        NONE
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
CONF
    for limit in s_rt h_rt s_cpu h_cpu s_fsize h_fsize s_data h_data s_stack h_stack s_core h_core s_rss h_rss s_vmem h_vmem; do
        printf '%-21s INFINITY\n' "$limit" >>"$t/queue"
    done
    cat >"$t/scheduler" <<CONF
algorithm                         default
schedule_interval                 0:0:1
maxujobs                          0
queue_sort_method                 load
job_load_adjustments              NONE
load_adjustment_decay_time        0:0:0
load_formula                      slots
schedd_job_info                   true
flush_submit_sec                  1
flush_finish_sec                  1
params                            none
reprioritize_interval             0:0:0
halftime                          168
usage_weight_list                 cpu=1.000000,mem=0.000000,io=0.000000
compensation_factor               5.000000
weight_user                       0.250000
weight_project                    0.250000
weight_department                 0.250000
weight_job                        0.250000
weight_tickets_functional         0
weight_tickets_share              0
share_override_tickets            TRUE
share_functional_shares           TRUE
max_functional_jobs_to_schedule   200
report_pjob_tickets               TRUE
max_pending_tasks_per_job         50
halflife_decay_list               none
policy_hierarchy                  OFS
weight_ticket                     0.500000
weight_waiting_time               0.278000
weight_deadline                   3600000.000000
weight_urgency                    0.500000
weight_priority                   0.000000
max_reservation                   0
default_duration                  INFINITY
CONF
    local args
    for args in "-Ae $t/host" "-as $HOST" "-Ap $t/pe" "-Aq $t/queue" "-Msconf $t/scheduler"; do
        # shellcheck disable=SC2086  # each is a qconf option and its file
        on qconf $args >>"$DIR/configure.log" 2>&1 || die "qconf $args failed: $(tail -3 "$DIR/configure.log")"
    done
}

# until qhost shows the execution host's load (its execd reported)
wait_up() {
    for _ in $(seq 1 120); do
        on qhost -h "$HOST" 2>/dev/null | awk -v h="$HOST" '$1 == h && $7 != "-" {up = 1} END {exit !up}' && return 0
        sleep 0.5
    done
    on qhost >&2 || true
    die "the execution host did not report; see $DIR/spool"
}

start() {
    [ "$(id -u)" -eq 0 ] || die "needs root (namespaces; SGE daemons)"
    command -v sge_qmaster >/dev/null || die "no Grid Engine here: scripts/system-deps.sh installs Debian's"
    if [ -f "$DIR/netns" ] && ip netns list | grep -qw "$(cat "$DIR/netns")"; then
        die "a Grid Engine already runs in $DIR (stop it first)"
    fi
    rm -rf "$DIR" && mkdir -p "$DIR"
    claim_netns
    write_cell
    on sge_qmaster
    for _ in $(seq 1 100); do on qconf -sconf >/dev/null 2>&1 && break; sleep 0.2; done
    configure
    on sge_execd
    wait_up
    echo "Grid Engine is up on $HOST with $SLOTS slots (queue sweep.q, pe smp): scripts/sge-local.sh on CMD..."
}

stop() {
    [ -f "$DIR/netns" ] || return 0
    local ns
    ns=$(cat "$DIR/netns")
    if ip netns list | grep -qw "$ns"; then
        for _ in $(seq 1 50); do
            local pids
            pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
            [ -z "${pids// /}" ] && break
            kill -9 $pids 2>/dev/null || true
            sleep 0.1
        done
        ip netns delete "$ns"
    fi
    rm -f "$DIR/netns"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
on) shift; on "$@" ;;
env) echo "export SGE_ROOT=$ROOT SGE_CELL=$CELL SGE_QMASTER_PORT=6444 SGE_EXECD_PORT=6445" ;;
*) die "usage: $0 start|stop|on CMD...|env" ;;
esac
