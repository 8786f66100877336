#!/usr/bin/env bash
# Run the workflow through a real SLURM on this one machine, then tear down.
#
#   .ci/slurm.sh [RESULTS_DIR]
#
# Installs Debian's slurmctld, slurmd, slurm-client and munge if missing,
# then starts a private one-node cluster with two partitions (host,
# target): its slurm.conf, munge key, state and logs all live in
# /tmp/ci-slurm (SLURM_CONF points there; /etc/slurm and /etc/munge are
# not touched), runs `snakemake --profile slurm`, and stops the daemons
# it started (also on failure), and only those.  On a machine where a
# SLURM or munge is already running it does nothing and exits 3.
# Needs root (apt, daemons).  The tests run it only when asked to:
# REPREPLAY_TEST_SLURM=1, which .ci/run sets under CI.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RESULTS=${1:-$ROOT/results-slurm}
PY=${PYTHON:-$ROOT/.venv/bin/python}
NODE=$(hostname -s)
RUN=/tmp/ci-slurm
export SLURM_CONF=$RUN/slurm.conf

for daemon in slurmctld slurmd munged; do
    if pgrep -x "$daemon" >/dev/null; then
        echo "slurm.sh: a $daemon is already running here; this test starts a private" \
             "cluster only on a machine without one" >&2
        exit 3
    fi
done
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi
rm -rf "$RUN"
mkdir -p "$RUN"/{spool/ctld,spool/d,munge}

teardown() {
    # our controller's jobs only (SLURM_CONF), then the daemons we started
    scancel --user="$(id -un)" >/dev/null 2>&1 || true
    for pidfile in "$RUN"/slurmd.pid "$RUN"/slurmctld.pid "$RUN"/munge/munged.pid; do
        [ -s "$pidfile" ] && kill "$(cat "$pidfile")" >/dev/null 2>&1 || true
    done
    sleep 1
}
trap teardown EXIT

# munge: a key of our own, the daemon on the default socket (slurm's
# auth/munge looks for it there; nothing else runs one, checked above)
dd if=/dev/urandom of="$RUN/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$RUN/munge/munge.key"
mkdir -p /run/munge
munged --force --key-file="$RUN/munge/munge.key" --pid-file="$RUN/munge/munged.pid" \
    --log-file="$RUN/munge/munged.log" --seed-file="$RUN/munge/munged.seed"

# one node, two partitions; more CPUs than cores so that N ranks fit in one
# allocation (config_overrides: slurmd trusts this file, not the hardware)
cat > "$SLURM_CONF" <<CONF
ClusterName=ci
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmi2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$RUN/spool/ctld
SlurmdSpoolDir=$RUN/spool/d
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$RUN/slurmctld.log
SlurmdLogFile=$RUN/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# no accounting: the executor asks squeue, which must still list finished jobs
MinJobAge=86400
SchedulerType=sched/backfill
NodeName=$NODE CPUs=16 RealMemory=8000 State=UNKNOWN
PartitionName=host Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=target Nodes=$NODE MaxTime=INFINITE State=UP
CONF
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
    if sinfo -h -o %T 2>/dev/null | grep -q idle; then break; fi
    sleep 0.5
done
sinfo

# inside a job, snakemake's jobstep runs each rule under a nested srun and
# strips every SLURM_* variable first, SLURM_CONF included; a real cluster's
# srun finds /etc/slurm, ours is told where its config is by this wrapper
mkdir -p "$RUN/bin"
printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$SLURM_CONF" "$(command -v srun)" > "$RUN/bin/srun"
chmod +x "$RUN/bin/srun"
export PATH="$RUN/bin:$(dirname "$PY"):$PATH"
# a run killed earlier may have left its lock behind
"$PY" -m snakemake --profile slurm --config results="$RESULTS" --unlock >/dev/null 2>&1 || true
# poll often: this cluster is ours alone (the profile is gentler for real ones)
if ! "$PY" -m snakemake --profile slurm --config results="$RESULTS" --forceall \
    --seconds-between-status-checks 1 --slurm-init-seconds-before-status-checks 1; then
    # the jobs' own logs say why a job failed; snakemake only names them
    for log in "$ROOT"/.snakemake/slurm_logs/rule_*/*.log; do
        [ -f "$log" ] && { echo "== $log"; tail -n 15 "$log"; }
    done >&2
    exit 1
fi
test -s "$RESULTS/report.html"
# what ran where: partition and the executor's comment (rule and wildcards)
echo "slurm jobs (partition comment):"
squeue -h -t all -o "%P %k"
echo "slurm workflow: $RESULTS/report.html"
