#!/usr/bin/env bash
# Stop what .ci/services/{sshd,slurm,netns}.sh started (by recorded PID), for local development.
# CI machines are thrown away, so .ci/run never calls this. `--purge` also deletes the scratch dirs.
set -uo pipefail
purge="${1:-}"
sshd_dir="${NCCLBOT_SSHD_DIR:-/tmp/ncclbot-test-sshd}"
slurm_dir="${NCCLBOT_SLURM_DIR:-/tmp/ncclbot-test-slurm}"
prefix="${NCCLBOT_NETNS_PREFIX:-ncclbot}"

stop_pid_file() {
    local file="$1" pid
    [ -f "$file" ] || return 0
    pid="$(cat "$file")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$file"
}

stop_pid_file "$sshd_dir/sshd.pid"

if [ -f "$slurm_dir/etc/slurm.conf" ]; then
    # Jobs and their slurmstepd outlive slurmd: cancel them first.
    SLURM_CONF="$slurm_dir/etc/slurm.conf" scancel --user="$(id -un)" 2>/dev/null || true
    stop_pid_file "$slurm_dir/slurmd.launch.pid"
    stop_pid_file "$slurm_dir/slurmctld.launch.pid"
    stop_pid_file "$slurm_dir/munge/munged.pid"
fi

for i in 1 2; do
    if [ -e "/run/netns/$prefix-h$i" ]; then ip netns delete "$prefix-h$i"; fi
    rm -rf "/etc/netns/$prefix-h$i"
done
for subnet in 10.77.0.0/24 172.17.0.0/16; do
    ip route show exact "$subnet" | grep -q '^blackhole' && ip route del blackhole "$subnet"
done

if [ "$purge" = "--purge" ]; then rm -rf "$sshd_dir" "$slurm_dir"; fi
exit 0
