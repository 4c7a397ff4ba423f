# shellcheck shell=bash
# Two network-namespace "hosts" for the cross-host probe tests, and export NCCLBOT_TEST_NETNS=1 and
# NCCLBOT_TEST_NETNS_PREFIX.
#
#   <prefix>-h1: eth0 10.77.0.1/24  <== veth ==>  <prefix>-h2: eth0 10.77.0.2/24
#   each also has docker0, a bridge with no ports holding 172.17.0.1/16 (the same address on both, as
#   on real Docker hosts): an interface that exists and is up but cannot reach the other host.
#   /etc/netns/<ns>/hosts maps node1/node2 (ip netns exec bind-mounts it over /etc/hosts).
#
# Safety: in the root namespace both subnets would follow the default route off the machine, so a
# test that forgot `ip netns exec` would send traffic out. Blackhole routes for them are installed
# here (only where the root namespace has no route of its own for the subnet): such a mistake then
# fails locally instead.
#
# Sourced by .ci/run (bash, `set -euo pipefail`, root). Idempotent. Stop: .ci/stop-probe-services.sh.

ncclbot_netns_start() {
    local prefix="${NCCLBOT_NETNS_PREFIX:-ncclbot}"
    if ! command -v ip >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 >/dev/null
    fi
    local subnet
    for subnet in 10.77.0.0/24 172.17.0.0/16; do
        if [ -z "$(ip route show exact "$subnet" | grep -v '^blackhole' || true)" ]; then
            ip route replace blackhole "$subnet"
        fi
    done
    local i ns
    for i in 1 2; do
        ns="$prefix-h$i"
        [ -e "/run/netns/$ns" ] || ip netns add "$ns"
        ip -n "$ns" link set lo up
        mkdir -p "/etc/netns/$ns"
        printf '127.0.0.1 localhost\n10.77.0.1 node1\n10.77.0.2 node2\n' >"/etc/netns/$ns/hosts"
        if ! ip -n "$ns" link show docker0 >/dev/null 2>&1; then
            ip -n "$ns" link add docker0 type bridge
            ip -n "$ns" addr add 172.17.0.1/16 dev docker0
        fi
        ip -n "$ns" link set docker0 up
    done
    if ! ip -n "$prefix-h1" link show eth0 >/dev/null 2>&1; then
        # Created directly inside the namespaces, so nothing appears in the root namespace even briefly.
        ip link add "$prefix-a" netns "$prefix-h1" type veth peer name "$prefix-b" netns "$prefix-h2"
        ip -n "$prefix-h1" link set "$prefix-a" name eth0
        ip -n "$prefix-h2" link set "$prefix-b" name eth0
        ip -n "$prefix-h1" addr add 10.77.0.1/24 dev eth0
        ip -n "$prefix-h2" addr add 10.77.0.2/24 dev eth0
    fi
    ip -n "$prefix-h1" link set eth0 up
    ip -n "$prefix-h2" link set eth0 up
    local tries=0
    until [ "$(ip netns exec "$prefix-h2" cat /sys/class/net/eth0/operstate)" = up ]; do
        tries=$((tries + 1))
        if [ "$tries" -ge 50 ]; then echo "netns.sh: veth did not come up" >&2; return 1; fi
        sleep 0.1
    done
    export NCCLBOT_TEST_NETNS=1
    export NCCLBOT_TEST_NETNS_PREFIX="$prefix"
    echo "netns.sh: namespaces $prefix-h1 (10.77.0.1) and $prefix-h2 (10.77.0.2) ready"
}

ncclbot_netns_start
unset -f ncclbot_netns_start
