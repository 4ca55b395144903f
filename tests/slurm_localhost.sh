#!/usr/bin/env bash
# A one-node Slurm cluster on localhost for the test suite (tests/test_slurm_profile.py):
# Debian's slurm-wlm and munge, no accounting storage, one fake GPU.
#
#   tests/slurm_localhost.sh install   # apt-get the packages (root), unless they are installed
#   tests/slurm_localhost.sh start     # write slurm.conf for this host, start munged, slurmctld, slurmd
#   tests/slurm_localhost.sh check     # sinfo, a CPU job and a --gpus=1 job
#   tests/slurm_localhost.sh stop      # stop the daemons by their PID files, remove its slurm.conf
#
# Needs root and no init system (the daemons are started by hand). It refuses to overwrite a
# slurm.conf it did not write, so it cannot clobber a real cluster's configuration.
set -euo pipefail

ETC=/etc/slurm
RUN=/run/slurm
STATE=/var/lib/slurm
LOGS=/var/log/slurm
MARK="# written by gpudissect tests/slurm_localhost.sh"
PARTITION=${GPUDISSECT_SLURM_PARTITION:-debug}

die() { echo "slurm_localhost: $*" >&2; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "needs root (it writes $ETC and starts daemons)"; }

install_packages() {
    need_root
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && command -v munged >/dev/null; then
        echo "slurm_localhost: slurm-wlm and munge are installed already"
        return
    fi
    command -v apt-get >/dev/null || die "needs apt-get (Debian's slurm-wlm and munge)"
    # No init system here: a policy-rc.d that exits 101 keeps the packages' maintainer scripts
    # from starting the daemons; this script starts them itself.
    local policy=/usr/sbin/policy-rc.d
    local had_policy=0
    [ -e "$policy" ] && had_policy=1
    [ "$had_policy" = 1 ] || printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod +x "$policy"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends slurm-wlm munge
    [ "$had_policy" = 1 ] || rm -f "$policy"
}

# slurmd -C prints this host's CPUs and memory; keep a tenth of the memory (at least 1 GiB)
# for the system, or jobs that ask for the whole node would starve it.
node_line() {
    local facts mem keep
    facts=$(slurmd -C | head -1)
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$facts")
    keep=$(( mem / 10 > 1024 ? mem / 10 : 1024 ))
    sed -e 's/^NodeName=[^ ]*/NodeName=localhost/' \
        -e "s/RealMemory=[0-9]*/RealMemory=$(( mem - keep ))/" <<<"$facts"
}

write_conf() {
    if [ -e "$ETC/slurm.conf" ] && ! grep -qF "$MARK" "$ETC/slurm.conf"; then
        die "$ETC/slurm.conf exists and was not written by this script; not touching it"
    fi
    mkdir -p "$ETC" "$RUN" "$STATE/slurmctld" "$STATE/slurmd" "$LOGS"
    # The fake GPU: a GPU gres needs a device file, or slurmd drops it ("Removing file-less
    # GPU") and the node cannot run --gpus jobs. /dev/null's major and minor numbers.
    [ -c "$RUN/fake-gpu0" ] || mknod "$RUN/fake-gpu0" c 1 3
    cat > "$ETC/slurm.conf" <<EOF
$MARK
ClusterName=gpudissect-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
# no cgroups in a container: process groups track the job steps
ProctrackType=proctrack/pgid
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
# no accounting database: sacct cannot answer, squeue can (see profiles/slurm/config.yaml)
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# every finished job gets a line here: the tests read job ids and states from it
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGS/jobcomp.log
# finished jobs stay visible to squeue for five minutes
MinJobAge=300
ReturnToService=2
MpiDefault=none
GresTypes=gpu
$(node_line) Gres=gpu:1 State=UNKNOWN
PartitionName=$PARTITION Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
    echo "NodeName=localhost Name=gpu File=$RUN/fake-gpu0" > "$ETC/gres.conf"
}

start_munge() {
    if [ -s /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; then
        return
    fi
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- munged
    munge -n | unmunge >/dev/null || die "munge does not round-trip a credential"
}

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
    need_root
    command -v slurmctld >/dev/null || die "slurm-wlm is not installed (run: $0 install)"
    write_conf
    start_munge
    running "$RUN/slurmctld.pid" || slurmctld
    running "$RUN/slurmd.pid" || slurmd -N localhost
    for _ in $(seq 60); do
        if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
            echo "slurm_localhost: up ($(sinfo -h -o '%P %D %c CPUs %m MB %G'))"
            return
        fi
        # a node that was down when slurmctld last ran comes back with ReturnToService=2
        scontrol update NodeName=localhost State=RESUME >/dev/null 2>&1 || true
        sleep 1
    done
    die "the node did not become idle; see $LOGS/slurmctld.log and $LOGS/slurmd.log"
}

check() {
    sinfo
    srun -t 1 hostname
    # a --gpus=1 job is scheduled on the fake GPU and sees it as device 0
    local seen
    seen=$(srun -t 1 --gpus=1 printenv CUDA_VISIBLE_DEVICES)
    [ "$seen" = 0 ] || die "a --gpus=1 job saw CUDA_VISIBLE_DEVICES='$seen', not 0"
    echo "slurm_localhost: a --gpus=1 job ran with CUDA_VISIBLE_DEVICES=$seen"
}

stop_pid() {
    local pidfile=$1 pid
    running "$pidfile" || return 0
    pid=$(cat "$pidfile")
    kill "$pid"
    for _ in $(seq 30); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.5
    done
    die "process $pid ($pidfile) did not stop"
}

stop() {
    need_root
    stop_pid "$RUN/slurmd.pid"
    stop_pid "$RUN/slurmctld.pid"
    stop_pid /run/munge/munged.pid
    # With its slurm.conf left behind and no controller, `scontrol show config` tries for about
    # 9 s before it gives up, and the Slurm executor plugin runs it whenever Snakemake starts
    # (it reads MinJobAge while it loads): every later snakemake call on this host would pay
    # that. Without the file scontrol fails at once. `start` writes it again.
    if [ -e "$ETC/slurm.conf" ] && grep -qF "$MARK" "$ETC/slurm.conf"; then
        rm -f "$ETC/slurm.conf" "$ETC/gres.conf"
    fi
}

case "${1:-}" in
    install) install_packages ;;
    start) start ;;
    check) check ;;
    stop) stop ;;
    *) die "usage: $0 install|start|check|stop" ;;
esac
