# shellcheck shell=bash
# Start a single-node Slurm (munged + slurmctld + slurmd, node "localhost", no systemd, no cgroups) for
# the slurm probe launcher tests and export SLURM_CONF, NCCLBOT_TEST_SLURM=1, NCCLBOT_TEST_SLURM_NODE.
#
# Sourced by .ci/run (bash, `set -euo pipefail`, root). Idempotent: reuses daemons already running from
# the same scratch dir. Local use: `source .ci/services/slurm.sh`; stop: .ci/stop-probe-services.sh.
# Everything lives in the scratch dir; /etc/slurm and /etc/munge are not touched. Accounting goes to
# jobcomp/filetxt, so `sacct -c` works without slurmdbd.

ncclbot_slurm_start() {
    local dir="${NCCLBOT_SLURM_DIR:-/tmp/ncclbot-test-slurm}"
    if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null \
        || ! command -v munged >/dev/null; then
        echo "slurm.sh: installing slurm and munge from apt"
        apt-get update -qq
        # Without recommends: 8 packages instead of 42.
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            slurmctld slurmd slurm-client munge >/dev/null
    fi
    mkdir -p "$dir"/{etc,munge,state,spool/slurmd-localhost,log}
    # munged insists that everyone may traverse its socket directory.
    chmod 755 "$dir" "$dir/munge"
    local conf="$dir/etc/slurm.conf"
    export SLURM_CONF="$conf"

    local munge_pid=""
    if [ -f "$dir/munge/munged.pid" ]; then munge_pid="$(cat "$dir/munge/munged.pid")"; fi
    if [ -z "$munge_pid" ] || ! kill -0 "$munge_pid" 2>/dev/null; then
        [ -f "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key"
        chmod 600 "$dir/munge/munge.key"
        setsid /usr/sbin/munged -F --force --socket="$dir/munge/munge.socket" \
            --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
            --seed-file="$dir/munge/munge.seed" --log-file="$dir/log/munged.log" </dev/null >/dev/null 2>&1 &
        echo $! >"$dir/munge/munged.pid"
        local tries=0
        until [ -S "$dir/munge/munge.socket" ]; do
            tries=$((tries + 1))
            if [ "$tries" -ge 50 ]; then echo "slurm.sh: munged did not start" >&2; return 1; fi
            sleep 0.1
        done
    fi

    if [ ! -f "$conf" ]; then
        local hardware
        hardware="$(slurmd -C | head -n 1 | sed -e 's/^NodeName=[^ ]*/NodeName=localhost/')"
        cat >"$conf" <<CONF
ClusterName=ncclbot-test
SlurmctldHost=localhost
SlurmctldPort=${NCCLBOT_SLURMCTLD_PORT:-6817}
SlurmdPort=${NCCLBOT_SLURMD_PORT:-6818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/state/slurmctld.pid
SlurmdPidFile=$dir/spool/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmdTimeout=30
$hardware State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
        : >"$dir/etc/cgroup.conf"
    fi

    # EpilogSlurmctld: a dispatcher that runs each executable hook in epilog.d and never fails a job.
    # Tests install their hook there (the webhook test: deploy/slurm/ncclbot-epilog.py) and remove it.
    mkdir -p "$dir/epilog.d"
    cat >"$dir/epilog-slurmctld.sh" <<EPILOG
#!/bin/sh
for hook in $dir/epilog.d/*; do
    [ -x "\$hook" ] && timeout 20 "\$hook" </dev/null >>$dir/log/epilog.log 2>&1
done
exit 0
EPILOG
    chmod 755 "$dir/epilog-slurmctld.sh"
    local added_epilog=""
    if ! grep -q '^EpilogSlurmctld=' "$conf"; then
        echo "EpilogSlurmctld=$dir/epilog-slurmctld.sh" >>"$conf"
        added_epilog=1
    fi

    local ctld_pid=""
    if [ -f "$dir/slurmctld.launch.pid" ]; then ctld_pid="$(cat "$dir/slurmctld.launch.pid")"; fi
    if [ -n "$added_epilog" ] && [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null; then
        # A cluster this script started before it configured the epilog: 22.05's `scontrol
        # reconfigure` does not load a new EpilogSlurmctld, so restart slurmctld (jobs are kept).
        echo "slurm.sh: restarting slurmctld to load EpilogSlurmctld"
        kill "$ctld_pid"
        local waited=0
        while kill -0 "$ctld_pid" 2>/dev/null; do
            waited=$((waited + 1))
            if [ "$waited" -ge 300 ]; then echo "slurm.sh: slurmctld did not stop" >&2; return 1; fi
            sleep 0.1
        done
    fi
    if [ -z "$ctld_pid" ] || ! kill -0 "$ctld_pid" 2>/dev/null; then
        # The daemons (and the epilogs they run) inherit the working directory: keep it in the scratch dir.
        pushd "$dir" >/dev/null
        setsid /usr/sbin/slurmctld -D -i -f "$conf" </dev/null >>"$dir/log/slurmctld.out" 2>&1 &
        echo $! >"$dir/slurmctld.launch.pid"
        popd >/dev/null
    fi
    local tries=0
    until scontrol ping 2>/dev/null | grep -q "is UP"; do
        tries=$((tries + 1))
        if [ "$tries" -ge 100 ]; then echo "slurm.sh: slurmctld did not come up" >&2; return 1; fi
        sleep 0.1
    done

    local slurmd_pid=""
    if [ -f "$dir/slurmd.launch.pid" ]; then slurmd_pid="$(cat "$dir/slurmd.launch.pid")"; fi
    if [ -z "$slurmd_pid" ] || ! kill -0 "$slurmd_pid" 2>/dev/null; then
        pushd "$dir" >/dev/null
        setsid /usr/sbin/slurmd -D -N localhost -f "$conf" </dev/null >>"$dir/log/slurmd.out" 2>&1 &
        echo $! >"$dir/slurmd.launch.pid"
        popd >/dev/null
    fi
    tries=0
    until [ "$(sinfo -h -n localhost -o %T 2>/dev/null)" = "idle" ]; do
        tries=$((tries + 1))
        if [ "$tries" -ge 150 ]; then echo "slurm.sh: node localhost did not become idle" >&2; return 1; fi
        sleep 0.1
    done
    export NCCLBOT_TEST_SLURM=1
    export NCCLBOT_TEST_SLURM_NODE=localhost
    export NCCLBOT_TEST_SLURM_EPILOG_DIR="$dir/epilog.d"
    echo "slurm.sh: single-node Slurm up (SLURM_CONF=$conf)"
}

ncclbot_slurm_start
unset -f ncclbot_slurm_start
