# shellcheck shell=bash
# Container builds for the deploy tests: podman (and runc, debootstrap), a containers.conf that
# works on this kind of VM, and a local Debian 12 base image (no registry is reachable from CI).
#
# Sourced by .ci/run (bash, `set -euo pipefail`, root). Idempotent and cached: the base image stays in
# podman's store and its rootfs tarball in $NCCLBOT_TEST_PODMAN_CACHE (default /var/cache/ncclbot-ci/podman),
# so only the first run debootstraps (40-90 s); later runs take a fraction of a second.
# Local use: `source .ci/services/podman.sh`. Another Debian mirror: NCCLBOT_TEST_DEBIAN_MIRROR.
# Exports CONTAINERS_CONF, NCCLBOT_TEST_PODMAN_BASE (the base image) and NCCLBOT_TEST_PODMAN_CACHE.

ncclbot_podman_start() {
    local cache="${NCCLBOT_TEST_PODMAN_CACHE:-/var/cache/ncclbot-ci/podman}"
    local base="localhost/ncclbot-base:bookworm"
    local mirror="${NCCLBOT_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
    local missing=()
    local tool
    # podman-compose comes from pip (the dev extra): Debian's 1.0.3 has no `config`.
    for tool in podman debootstrap runc; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "podman.sh: installing ${missing[*]} from apt"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            podman debootstrap runc uidmap >/dev/null
    fi
    mkdir -p "$cache"

    # This VM runs without CAP_SYS_RESOURCE (a container may not raise its rlimits above ours) and with
    # cgroup v1 plus a v2 mount holding a controller, which crun refuses and runc accepts.
    cat >"$cache/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
CONF
    export CONTAINERS_CONF="$cache/containers.conf"

    if ! podman image exists "$base"; then
        local tarball="$cache/debian-bookworm-python3.tar"
        if [ ! -s "$tarball" ]; then
            echo "podman.sh: debootstrapping a minimal Debian 12 with python3 (once; cached in $cache)"
            local rootfs="$cache/rootfs"
            rm -rf "$rootfs"
            if ! debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
                bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1; then
                tail -n 20 "$cache/debootstrap.log"
                echo "podman.sh: debootstrap from $mirror failed (set NCCLBOT_TEST_DEBIAN_MIRROR?)" >&2
                return 1
            fi
            rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
                "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
            tar -C "$rootfs" -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball"
            rm -rf "$rootfs"
        fi
        podman import --quiet --change 'CMD ["/bin/bash"]' "$tarball" "$base" >/dev/null
    fi
    export NCCLBOT_TEST_PODMAN_BASE="$base"
    export NCCLBOT_TEST_PODMAN_CACHE="$cache"
    echo "podman.sh: $(podman --version), base image $base; CONTAINERS_CONF=$CONTAINERS_CONF"
}

ncclbot_podman_start
unset -f ncclbot_podman_start
