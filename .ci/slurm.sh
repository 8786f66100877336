#!/usr/bin/env bash
# Run the workflow through a real SLURM on this one machine, then tear down.
#
#   .ci/slurm.sh [RESULTS_DIR]
#
# Installs Debian's slurmctld, slurmd, slurm-client and munge if missing,
# writes a slurm.conf for this node with two partitions (host, target),
# starts munged, slurmctld and slurmd without systemd, runs
# `snakemake --profile slurm` and stops the daemons again (also on failure).
# Idempotent: run it as often as you like.  Needs root (apt, daemons).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RESULTS=${1:-$ROOT/results-slurm}
PY=${PYTHON:-$ROOT/.venv/bin/python}
NODE=$(hostname -s)
ETC=/etc/slurm
RUN=/tmp/ci-slurm
mkdir -p "$RUN"

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi

teardown() {
    scancel --user="$(id -un)" >/dev/null 2>&1 || true
    pkill -x slurmd >/dev/null 2>&1 || true
    pkill -x slurmctld >/dev/null 2>&1 || true
    pkill -x munged >/dev/null 2>&1 || true
    sleep 1
}
trap teardown EXIT
teardown

# munge: a key, its directories, the daemon (as root: --force)
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
chmod 400 /etc/munge/munge.key
munged --force

# one node, two partitions; more CPUs than cores so that N ranks fit in one
# allocation (config_overrides: slurmd trusts this file, not the hardware)
mkdir -p "$ETC" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat > "$ETC/slurm.conf" <<CONF
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
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
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
slurmctld
slurmd
for _ in $(seq 60); do
    if sinfo -h -o %T 2>/dev/null | grep -q idle; then break; fi
    sleep 0.5
done
sinfo

export PATH="$(dirname "$PY"):$PATH"
# a run killed earlier may have left its lock behind
"$PY" -m snakemake --profile slurm --config results="$RESULTS" --unlock >/dev/null 2>&1 || true
# poll often: this cluster is ours alone (the profile is gentler for real ones)
"$PY" -m snakemake --profile slurm --config results="$RESULTS" --forceall \
    --seconds-between-status-checks 1 --slurm-init-seconds-before-status-checks 1
test -s "$RESULTS/report.html"
# what ran where: partition and the executor's comment (rule and wildcards)
echo "slurm jobs (partition comment):"
squeue -h -t all -o "%P %k"
echo "slurm workflow: $RESULTS/report.html"
