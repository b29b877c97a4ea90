# Throwaway PostgreSQL and Redis servers for the tests, on loopback ports in a temp dir.
# Source this file, then call `services_start`; it exports
#   SLUICE_TEST_POSTGRES_URL  postgres://sluice@127.0.0.1:PORT/postgres (trust auth, loopback only)
#   SLUICE_TEST_REDIS_URL     redis://127.0.0.1:PORT
#   SLUICE_TEST_POSTGRES_RESTART_URL, SLUICE_TEST_POSTGRES_RESTART_CTL
#                             a second PostgreSQL that outage tests may stop and start
#                             (`$SLUICE_TEST_POSTGRES_RESTART_CTL stop|start`); the shared one
#                             above stays up for every other test
# and installs a trap that stops both when the calling shell exits. Missing servers are
# installed from Debian packages (postgresql, redis-server; and nginx-light, the benchmark's
# floor) with apt-get, through sudo when not root. PostgreSQL refuses to run as root, so as root
# it runs as the `postgres` user (created by the package) or `nobody`.

services_need() {
  local missing=()
  [ -n "$(services_pg_bin)" ] || missing+=(postgresql)
  command -v redis-server >/dev/null || missing+=(redis-server)
  # Not a service the tests keep running: `sluice bench` starts nginx as its floor.
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "services: installing ${missing[*]} (Debian packages)"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The directory holding initdb and pg_ctl (Debian keeps them out of PATH).
services_pg_bin() {
  if command -v pg_ctl >/dev/null && command -v initdb >/dev/null; then
    dirname "$(command -v pg_ctl)"
    return
  fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

# A free TCP port on 127.0.0.1 (asks the kernel for one, then releases it).
services_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Runs a command as the PostgreSQL owner: ourselves, or an unprivileged user when root.
services_as_pg() {
  if [ "$(id -u)" -ne 0 ]; then
    "$@"
  elif command -v runuser >/dev/null; then
    runuser -u "$SERVICES_PG_USER" -- "$@"
  else
    su -s /bin/sh "$SERVICES_PG_USER" -c "$(printf '%q ' "$@")"
  fi
}

# The command line that runs a command as the PostgreSQL owner, quoted for a script.
services_pg_cmd() {
  if [ "$(id -u)" -ne 0 ]; then
    printf '%q ' "$@"
  else
    printf 'runuser -u %q -- ' "$SERVICES_PG_USER"
    printf '%q ' "$@"
  fi
}

# initdb + start one throwaway cluster: data in $2, listening on 127.0.0.1:$3, settings
# (postgresql.conf) so that a restart by the control script keeps the same port.
services_pg_cluster() {
  local bin="$1" data="$2" port="$3"
  services_as_pg "$bin/initdb" -D "$data" -U sluice --auth=trust -E UTF8 \
    --no-sync >"$data.initdb.log" 2>&1 || {
    cat "$data.initdb.log"
    return 1
  }
  cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$SERVICES_DIR'
fsync = off
max_connections = 300
CONF
  services_as_pg "$bin/pg_ctl" -D "$data" -l "$data.log" -w -t 30 start >/dev/null || {
    cat "$data.log"
    return 1
  }
}

services_start() {
  services_need
  SERVICES_DIR="$(mktemp -d "${TMPDIR:-/tmp}/sluice-services.XXXXXX")"
  trap services_stop EXIT
  local bin pg_port redis_port
  bin="$(services_pg_bin)"
  pg_port="$(services_free_port)"
  redis_port="$(services_free_port)"

  SERVICES_PG_USER=postgres
  id -u postgres >/dev/null 2>&1 || SERVICES_PG_USER=nobody
  if [ "$(id -u)" -eq 0 ]; then
    chown "$SERVICES_PG_USER" "$SERVICES_DIR"
    chmod 755 "$SERVICES_DIR"
  fi
  services_pg_cluster "$bin" "$SERVICES_DIR/pg" "$pg_port" || return 1
  export SLUICE_TEST_POSTGRES_URL="postgres://sluice@127.0.0.1:$pg_port/postgres"

  local restart_port
  restart_port="$(services_free_port)"
  services_pg_cluster "$bin" "$SERVICES_DIR/pg-restart" "$restart_port" || return 1
  # A control script, so a test process can stop and start its own server (as the right user).
  cat >"$SERVICES_DIR/pg-restart-ctl" <<CTL
#!/usr/bin/env bash
set -e
case "\$1" in
  stop) $(services_pg_cmd "$bin/pg_ctl" -D "$SERVICES_DIR/pg-restart" -m fast -w stop) >/dev/null ;;
  start) $(services_pg_cmd "$bin/pg_ctl" -D "$SERVICES_DIR/pg-restart" -l "$SERVICES_DIR/pg-restart.log" -w -t 30 start) >/dev/null ;;
  *) echo "usage: \$0 stop|start" >&2; exit 2 ;;
esac
CTL
  chmod 755 "$SERVICES_DIR/pg-restart-ctl"
  export SLUICE_TEST_POSTGRES_RESTART_URL="postgres://sluice@127.0.0.1:$restart_port/postgres"
  export SLUICE_TEST_POSTGRES_RESTART_CTL="$SERVICES_DIR/pg-restart-ctl"

  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --daemonize yes --pidfile "$SERVICES_DIR/redis.pid" --logfile "$SERVICES_DIR/redis.log" \
    --dir "$SERVICES_DIR"
  local i
  for i in $(seq 50); do
    [ -s "$SERVICES_DIR/redis.pid" ] && break
    sleep 0.1
  done
  export SLUICE_TEST_REDIS_URL="redis://127.0.0.1:$redis_port"
  echo "services: PostgreSQL on 127.0.0.1:$pg_port, Redis on 127.0.0.1:$redis_port ($SERVICES_DIR)"
}

services_stop() {
  [ -n "${SERVICES_DIR:-}" ] || return 0
  local data
  for data in "$SERVICES_DIR/pg" "$SERVICES_DIR/pg-restart"; do
    if [ -f "$data/postmaster.pid" ]; then
      services_as_pg "$(services_pg_bin)/pg_ctl" -D "$data" -m immediate stop \
        >/dev/null 2>&1 || true
    fi
  done
  if [ -s "$SERVICES_DIR/redis.pid" ]; then
    kill "$(cat "$SERVICES_DIR/redis.pid")" 2>/dev/null || true
  fi
  rm -rf "$SERVICES_DIR"
  SERVICES_DIR=
}
