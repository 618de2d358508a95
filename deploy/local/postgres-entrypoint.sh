#!/bin/bash
# Initializes $PGDATA on first start (user, password, database from POSTGRES_*), then runs the server.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
user=${POSTGRES_USER:-postgres}
database=${POSTGRES_DB:-$user}
mkdir -p "$PGDATA" /var/run/postgresql
chown -R postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" >"$pwfile"
    chown postgres "$pwfile"
    runuser -u postgres -- "$bin/initdb" -D "$PGDATA" -U "$user" --pwfile="$pwfile" \
        --auth-host=scram-sha-256 --auth-local=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    if [ "$database" != "postgres" ]; then
        echo "CREATE DATABASE \"$database\"" | runuser -u postgres -- "$bin/postgres" --single -D "$PGDATA" postgres >/dev/null
    fi
fi
exec runuser -u postgres -- "$bin/postgres" -D "$PGDATA" -p "$PGPORT" -c "listen_addresses=$POSTGRES_LISTEN"
