# shellcheck shell=bash
# Start a throw-away PostgreSQL for the store tests and export NCCLBOT_TEST_POSTGRES_URL.
#
# Sourced by .ci/run (bash, `set -euo pipefail`, root). Idempotent: a second run reuses the server
# already running from the same scratch directory. Local use: `source .ci/services/postgres.sh`.
# The data directory lives in a scratch dir under /tmp (tests only: fsync off), owned by the
# `postgres` user, because initdb and postgres refuse to run as root.

ncclbot_pg_start() {
    local dir="${NCCLBOT_PG_DIR:-/tmp/ncclbot-test-postgres}"
    local port="${NCCLBOT_PG_PORT:-5433}"
    local bin
    bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
        echo "postgres.sh: installing PostgreSQL from apt"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
        bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
    fi
    local as_postgres=(runuser -u postgres --)
    if [ "$(id -u)" != 0 ]; then
        as_postgres=()  # already an unprivileged user that may own the cluster
    fi

    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
    chmod 700 "$dir"

    if [ -f "$dir/port" ]; then
        port="$(cat "$dir/port")"
    fi
    if ! "${as_postgres[@]}" "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        if [ ! -f "$dir/data/PG_VERSION" ]; then
            "${as_postgres[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
                --locale=C.UTF-8 -N >/dev/null
            # Another server on the wanted port (not ours): take the next free one.
            while (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
            cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
            echo "$port" >"$dir/port"
        fi
        "${as_postgres[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start >/dev/null
    fi
    export NCCLBOT_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
    echo "postgres.sh: PostgreSQL on 127.0.0.1:$port (data in $dir); NCCLBOT_TEST_POSTGRES_URL exported"
}

ncclbot_pg_start
unset -f ncclbot_pg_start
