#!/usr/bin/env bash
# A real Slurm on this one machine, for checking the `slurm` policy against slurmctld.
#
#   scripts/real_slurm.sh install        # apt-get the daemons (Debian/Ubuntu, as root)
#   scripts/real_slurm.sh start [DIR]    # munge, mariadb, slurmdbd, slurmctld, NODES slurmd
#   scripts/real_slurm.sh stop  [DIR]    # stop them (by the PIDs this script recorded)
#   scripts/real_slurm.sh env   [DIR]    # print the SLURM_CONF line for clients
#
# Everything lives in DIR (default /tmp/ss-slurm): configuration, state, logs, the
# database and fake GPU device nodes. Nothing listens beyond 127.0.0.x.
#
# What it relies on (each found by trying it with Debian 12's Slurm 22.05):
# * several emulated nodes on one host: `slurmd -N NAME`, each node with its own
#   NodeHostname, NodeAddr (127.0.0.x) and Port; `SlurmdParameters=config_overrides`
#   lets them declare more CPUs and GPUs than the host has;
# * GPU GRES needs `File=` device nodes: character devices made with mknod (major 195,
#   NVIDIA's), never opened (sleep jobs do not touch them);
# * age and fair-share factors need slurmdbd (hence mariadb); usage is charged with
#   AccountingStorageEnforce=associations,limits,qos; sacct shows gres/gpu in its TRES
#   only with AccountingStorageTRES=gres/gpu;
# * bf_interval, bf_resolution, sched_interval and batch_sched_delay are lowered for
#   second-scale jobs; PriorityCalcPeriod cannot go below one minute.
#
# Environment: NODES (default 4), GPUS (per node, default 4), CPUS (per node, default 8),
# KILL_WAIT (KillWait, default 1), SLURM_EXTRA (extra slurm.conf lines, e.g.
# "PriorityWeightJobSize=1000"), and the
# ports CTLD_PORT (6817), DBD_PORT (6819), DBPORT (mariadb, 3307), NODE_PORT (17000 + i).
set -euo pipefail

CMD=${1:-}
DIR=${2:-/tmp/ss-slurm}
NODES=${NODES:-4}
GPUS=${GPUS:-4}
CPUS=${CPUS:-8}
KILL_WAIT=${KILL_WAIT:-1}
DBPORT=${DBPORT:-3307}
CTLD_PORT=${CTLD_PORT:-6817}
DBD_PORT=${DBD_PORT:-6819}
NODE_PORT=${NODE_PORT:-17000}

die() { echo "real_slurm.sh: $*" >&2; exit 2; }

install() {
    [ "$(id -u)" = 0 ] || die "install needs root (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurmdbd slurm-client munge mariadb-server >/dev/null
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    for _ in $(seq 1 $((limit * 4))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.25
    done
    die "$what did not come up in ${limit}s (logs in $DIR/log)"
}

write_conf() {
    local nodes_line="" gres_lines="" i
    for i in $(seq 1 "$NODES"); do
        nodes_line+="NodeName=n$i NodeHostname=n$i NodeAddr=127.0.0.$((i + 1)) Port=$((NODE_PORT + i)) CPUs=$CPUS RealMemory=16000 Gres=gpu:$GPUS"$'\n'
        mkdir -p "$DIR/dev/n$i"
        local g
        for g in $(seq 0 $((GPUS - 1))); do
            [ -e "$DIR/dev/n$i/nvidia$g" ] || mknod "$DIR/dev/n$i/nvidia$g" c 195 "$g"
        done
        gres_lines+="NodeName=n$i Name=gpu File=$DIR/dev/n$i/nvidia[0-$((GPUS - 1))]"$'\n'
    done
    cat >"$DIR/slurm.conf" <<EOF
ClusterName=ss
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait=$KILL_WAIT
MinJobAge=600
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=0
PriorityWeightPartition=0
PriorityWeightQOS=0
PriorityDecayHalfLife=1-0
PriorityMaxAge=1:00:00
PriorityCalcPeriod=1
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,bf_resolution=1,sched_interval=1,batch_sched_delay=0,bf_window=60,default_queue_depth=1000
${SLURM_EXTRA:-}
$nodes_line
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    printf '%s' "$gres_lines" >"$DIR/gres.conf"
    cat >"$DIR/slurmdbd.conf" <<EOF
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
AuthType=auth/munge
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DBPORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$DIR/slurmdbd.conf"
}

start() {
    [ "$(id -u)" = 0 ] || die "start needs root (daemons run as root here)"
    command -v slurmctld >/dev/null || die "slurmctld is not installed; run: $0 install"
    mkdir -p "$DIR"/{state,spool,run,log,db}
    for i in $(seq 1 "$NODES"); do mkdir -p "$DIR/spool/n$i"; done
    write_conf
    # munge (its own key from the package; the daemon refuses to run as root)
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        mkdir -p /run/munge && chown munge:munge /run/munge
        runuser -u munge -- /usr/sbin/munged
        touch "$DIR/run/munge.ours"
    fi
    # mariadb on a private data directory and port
    if [ ! -d "$DIR/db/mysql" ]; then
        mariadb-install-db --user=root --datadir="$DIR/db" --auth-root-authentication-method=normal >"$DIR/log/db-install.log" 2>&1
    fi
    /usr/sbin/mariadbd --user=root --datadir="$DIR/db" --socket="$DIR/run/mysqld.sock" --port="$DBPORT" \
        --bind-address=127.0.0.1 --pid-file="$DIR/run/mariadb.pid" --log-error="$DIR/log/mariadb.log" &
    echo $! >"$DIR/run/mariadb.bgpid"
    wait_for 60 mariadb mariadb --socket="$DIR/run/mysqld.sock" -uroot -e "select 1"
    mariadb --socket="$DIR/run/mysqld.sock" -uroot -e \
        "create user if not exists 'slurm'@'localhost' identified by 'slurm'; create user if not exists 'slurm'@'127.0.0.1' identified by 'slurm'; grant all on slurm_acct_db.* to 'slurm'@'localhost'; grant all on slurm_acct_db.* to 'slurm'@'127.0.0.1'; flush privileges;"
    export SLURM_CONF="$DIR/slurm.conf"
    # slurmdbd reads slurmdbd.conf from the directory of SLURM_CONF.
    slurmdbd -D >"$DIR/log/slurmdbd.out" 2>&1 &
    echo $! >"$DIR/run/slurmdbd.bgpid"
    wait_for 60 slurmdbd sacctmgr -n show cluster
    sacctmgr -i add cluster ss >/dev/null 2>&1 || true
    slurmctld -D -f "$DIR/slurm.conf" >"$DIR/log/slurmctld.out" 2>&1 &
    echo $! >"$DIR/run/slurmctld.bgpid"
    wait_for 60 slurmctld scontrol ping
    for i in $(seq 1 "$NODES"); do
        slurmd -D -N "n$i" -f "$DIR/slurm.conf" >"$DIR/log/slurmd-n$i.out" 2>&1 &
        echo $! >"$DIR/run/slurmd-n$i.bgpid"
    done
    wait_for 60 "the nodes" bash -c "[ \$(sinfo -h -t idle -o %D | awk '{s+=\$1} END {print s+0}') -ge $NODES ]"
    # accounts A and B with users alice and bob (Unix users created if missing)
    for who in alice bob; do id "$who" >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin "$who"; done
    sacctmgr -i add account A Fairshare=1 >/dev/null 2>&1 || true
    sacctmgr -i add account B Fairshare=1 >/dev/null 2>&1 || true
    sacctmgr -i add user alice Account=A Fairshare=1 >/dev/null 2>&1 || true
    sacctmgr -i add user bob Account=B Fairshare=1 >/dev/null 2>&1 || true
    echo "slurm up: export SLURM_CONF=$DIR/slurm.conf"
}

stop() {
    export SLURM_CONF="$DIR/slurm.conf"
    scancel -u alice >/dev/null 2>&1 || true
    scancel -u bob >/dev/null 2>&1 || true
    local f pid
    for f in "$DIR"/run/slurmd-*.bgpid "$DIR/run/slurmctld.bgpid" "$DIR/run/slurmdbd.bgpid" "$DIR/run/mariadb.bgpid"; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$f"
    done
    if [ -f "$DIR/run/munge.ours" ] && [ -f /run/munge/munged.pid ]; then
        kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
        rm -f "$DIR/run/munge.ours"
    fi
    echo "slurm stopped"
}

case "$CMD" in
    install) install ;;
    start) start ;;
    stop) stop ;;
    env) echo "export SLURM_CONF=$DIR/slurm.conf" ;;
    *) die "usage: $0 install|start|stop|env [DIR]" ;;
esac
