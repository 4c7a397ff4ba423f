# shellcheck shell=bash
# Start a key-only sshd on 127.0.0.1 for the ssh probe launcher tests and export
# NCCLBOT_TEST_SSH_{HOST,PORT,USER,KEY,KNOWN_HOSTS,DIR}.
#
# Sourced by .ci/run (bash, `set -euo pipefail`, root). Idempotent: reuses the sshd already running
# from the same scratch dir. Local use: `source .ci/services/sshd.sh`; stop: .ci/stop-probe-services.sh.
# Besides the accepted key it makes a second key that is NOT authorised and a known_hosts file with a
# wrong host key, so the tests can check refusal and host-key verification for real.

ncclbot_sshd_start() {
    local dir="${NCCLBOT_SSHD_DIR:-/tmp/ncclbot-test-sshd}"
    local port="${NCCLBOT_SSHD_PORT:-2222}"
    if [ ! -x /usr/sbin/sshd ] || ! command -v ssh-keygen >/dev/null; then
        echo "sshd.sh: installing openssh-server from apt"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            openssh-server openssh-client >/dev/null
    fi
    # sshd refuses to start without its privilege-separation directory (normally made by systemd).
    mkdir -p "$dir" /run/sshd
    chmod 700 "$dir"
    [ -f "$dir/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C ncclbot-test-host -f "$dir/host_ed25519"
    [ -f "$dir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C ncclbot-test -f "$dir/id_ed25519"
    [ -f "$dir/unauthorised_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/unauthorised_ed25519"
    [ -f "$dir/other_host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/other_host_ed25519"
    cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
    if [ -f "$dir/port" ]; then port="$(cat "$dir/port")"; fi

    local pid=""
    if [ -f "$dir/sshd.pid" ]; then pid="$(cat "$dir/sshd.pid")"; fi
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        while (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
        echo "$port" >"$dir/port"
        cat >"$dir/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_ed25519
PidFile $dir/sshd-daemon.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
CONF
        # -D keeps it in the foreground so $! is the listener; -e logs to stderr (the log file).
        setsid /usr/sbin/sshd -D -e -f "$dir/sshd_config" >"$dir/sshd.log" 2>&1 </dev/null &
        echo $! >"$dir/sshd.pid"
    fi
    # Two names for the same sshd, so multi-node launches can be tested on one machine.
    {
        echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/host_ed25519.pub")"
        echo "[localhost]:$port $(cut -d' ' -f1,2 "$dir/host_ed25519.pub")"
    } >"$dir/known_hosts"
    echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/other_host_ed25519.pub")" >"$dir/known_hosts_wrong"
    local tries=0
    until ssh -p "$port" -i "$dir/id_ed25519" -o UserKnownHostsFile="$dir/known_hosts" \
        -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=2 "$(id -un)@127.0.0.1" true 2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -ge 50 ]; then
            echo "sshd.sh: sshd did not come up; log:" >&2
            cat "$dir/sshd.log" >&2
            return 1
        fi
        sleep 0.1
    done
    export NCCLBOT_TEST_SSH_HOST=127.0.0.1
    export NCCLBOT_TEST_SSH_PORT="$port"
    export NCCLBOT_TEST_SSH_USER="$(id -un)"
    export NCCLBOT_TEST_SSH_KEY="$dir/id_ed25519"
    export NCCLBOT_TEST_SSH_KNOWN_HOSTS="$dir/known_hosts"
    export NCCLBOT_TEST_SSH_DIR="$dir"
    echo "sshd.sh: sshd on 127.0.0.1:$port (pid $(cat "$dir/sshd.pid"))"
}

ncclbot_sshd_start
unset -f ncclbot_sshd_start
