#!/usr/bin/env bash
# The deployment artefacts, built and run here: the container image from deploy/Dockerfile
# (on a Docker engine this script starts and stops), deploy/compose.yaml, the Helm chart and
# the systemd unit. The checks themselves are the pytest files beside this script.
#
#   bash tests/deploy/test_deploy.sh [BINARY]
#
# BINARY (default: target/release/sluice; scripts/test.sh passes its `ci`-profile build) goes into the image
# through deploy/docker-context.sh; SLUICE_DEPLOY_BINARY=… does the same (a musl build, say).
# SLUICE_DEPLOY_FROM_SOURCE=1 builds the image from source instead, as a release would (a musl
# build with fat LTO inside Docker: many minutes; not part of scripts/test.sh).
# Expensive downloads are cached outside the repository, in
# ${XDG_CACHE_HOME:-~/.cache}/sluice-deploy (helm, built with `go install`; the debootstrap
# base of the from-source build).
# Docker engine: its own dockerd (data, exec root, pidfile and socket in a temporary directory)
# with no bridge and no iptables; every container runs with --network host, so traffic stays
# on loopback. Where the engine cannot start, the Docker tests are skipped with the reason.
# helm must install: with CI=true a missing helm fails the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"

HELM_VERSION=v3.21.4
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sluice-deploy"
target="${CARGO_TARGET_DIR:-$repo/target}"
bin="${1:-${SLUICE_DEPLOY_BINARY:-$target/release/sluice}}"
image="sluice:deploy-test"
ci="${CI:-}"

say() { printf 'deploy: %s\n' "$*"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo -n)

if [ ! -x "$bin" ]; then
  echo "deploy: no sluice binary at $bin (cargo build --release --locked --bin sluice)" >&2
  exit 1
fi
bin="$(realpath "$bin")"

# PostgreSQL and Redis for the fleet tests: scripts/test.sh has started them already; alone,
# this script starts its own.
if [ -z "${SLUICE_TEST_POSTGRES_URL:-}" ] || [ -z "${SLUICE_TEST_REDIS_URL:-}" ]; then
  # shellcheck source=scripts/services.sh
  source scripts/services.sh
  services_start
  services_started=1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/sluice-deploy.XXXXXX")"
dockerd_pid=""
cleanup() {
  local rc=$?
  if [ -n "$dockerd_pid" ]; then
    # Everything the tests made lives in this throwaway engine: stop its containers, then it.
    local ids
    mapfile -t ids < <("$DOCKER" ps -aq 2>/dev/null || true)
    [ "${#ids[@]}" -eq 0 ] || "$DOCKER" rm -f "${ids[@]}" >/dev/null 2>&1 || true
    "${sudo_cmd[@]}" kill "$dockerd_pid" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$dockerd_pid" 2>/dev/null || break
      sleep 0.1
    done
    "${sudo_cmd[@]}" kill -9 "$dockerd_pid" 2>/dev/null || true
    # dockerd leaves its network namespace mounted under the exec root.
    awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r |
      while read -r m; do "${sudo_cmd[@]}" umount -l "$m" 2>/dev/null || true; done
  fi
  if [ -n "${services_started:-}" ]; then
    services_stop
  fi
  "${sudo_cmd[@]}" rm -rf "$work" 2>/dev/null || rm -rf "$work" 2>/dev/null || true
  exit "$rc"
}
# After services_start, whose own trap this replaces (cleanup calls services_stop).
trap cleanup EXIT

# ---- helm: built once from the Go module proxy into the cache --------------------------------
helm="$cache/helm-$HELM_VERSION/helm"
if [ ! -x "$helm" ]; then
  if command -v go >/dev/null; then
    say "installing helm $HELM_VERSION with go install (once; cached in $cache)"
    started="$(now)"
    if GOBIN="$cache/helm-$HELM_VERSION" GOFLAGS=-buildvcs=false \
      go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"; then
      say "helm installed in $(since "$started") s"
    else
      say "go install helm failed"
    fi
  fi
fi
if [ -x "$helm" ]; then
  export SLUICE_HELM="$helm"
else
  export SLUICE_HELM_SKIPPED="helm could not be installed (go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION)"
  if [ -n "$ci" ]; then
    echo "deploy: $SLUICE_HELM_SKIPPED" >&2
    exit 1
  fi
fi

# ---- Docker: our own engine, no bridge, no iptables ------------------------------------------
docker_skip() {
  export SLUICE_DOCKER_SKIPPED="Docker tests skipped: $*"
  say "$SLUICE_DOCKER_SKIPPED"
}

docker_start() {
  if ! command -v dockerd >/dev/null; then
    say "installing docker.io (Debian package)"
    if ! { "${sudo_cmd[@]}" apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq docker.io >/dev/null; }; then
      docker_skip "docker.io could not be installed"
      return 1
    fi
  fi
  # The client that came with this engine (Debian's), which speaks BuildKit without the buildx
  # plugin; any docker client otherwise.
  DOCKER=/usr/bin/docker
  [ -x "$DOCKER" ] || DOCKER="$(command -v docker || true)"
  [ -n "$DOCKER" ] || { docker_skip "no docker client"; return 1; }
  local d="$work/docker"
  mkdir -p "$d"
  export DOCKER_HOST="unix://$d/docker.sock"
  "${sudo_cmd[@]}" dockerd \
    --data-root "$d/data" --exec-root "$d/exec" --pidfile "$d/docker.pid" \
    --host "$DOCKER_HOST" --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
    --containerd-namespace sluice-deploy --containerd-plugins-namespace sluice-deploy-plugins \
    >"$d/dockerd.log" 2>&1 &
  dockerd_pid=$!
  local started
  started="$(now)"
  for _ in $(seq 300); do
    if "$DOCKER" version >/dev/null 2>&1; then
      say "dockerd up in $(since "$started") s ($("$DOCKER" version --format '{{.Server.Version}}'))"
      return 0
    fi
    if ! kill -0 "$dockerd_pid" 2>/dev/null; then
      break
    fi
    sleep 0.1
  done
  tail -20 "$d/dockerd.log" >&2 || true
  docker_skip "dockerd did not start (its log is above)"
  return 1
}

# The image from the host's binary (deploy/docker-context.sh + the Dockerfile's prebuilt stage).
build_prebuilt() {
  say "building $image from $bin"
  local started
  started="$(now)"
  bash deploy/docker-context.sh "$bin" "$work/context"
  DOCKER_BUILDKIT=1 "$DOCKER" build --quiet -f deploy/Dockerfile \
    --build-arg SLUICE_BINARY=prebuilt --build-arg SLUICE_GIT_COMMIT="$commit" \
    -t "$image" "$work/context" >/dev/null
  say "image built in $(since "$started") s"
}

# The image from source (the Dockerfile's default `source` stage), with no registry: the Rust
# image it compiles in is made here, as the official one is (Debian bookworm, gcc, rustup),
# from a debootstrap base cached in $cache. The checks then compare the image with the binary
# copied out of it.
build_from_source() {
  local base="$cache/debian-bookworm-minbase.tar.gz" started rust cid
  if [ ! -s "$base" ]; then
    command -v debootstrap >/dev/null ||
      DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq debootstrap >/dev/null
    say "debootstrap --variant=minbase bookworm (once; cached in $cache)"
    started="$(now)"
    mkdir -p "$cache"
    "${sudo_cmd[@]}" debootstrap --variant=minbase bookworm "$work/rootfs" \
      "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 ||
      { tail -20 "$work/debootstrap.log" >&2; return 1; }
    "${sudo_cmd[@]}" tar -C "$work/rootfs" -czf "$base.tmp" . && mv "$base.tmp" "$base"
    say "base made in $(since "$started") s: $(du -h "$base" | cut -f1)"
  fi
  "$DOCKER" import "$base" sluice-local/debian:bookworm >/dev/null
  rust="$(rustc --version | awk '{print $2}')"
  mkdir -p "$work/rust-image/ca"
  cp -L "$(command -v rustup)" "$work/rust-image/rustup-init"
  # The host's own CAs (a company's, or an egress proxy's, as on the machine this was written
  # on), so that rustup and cargo inside the build reach their registries as the host does.
  cp -L /usr/local/share/ca-certificates/*.crt "$work/rust-image/ca/" 2>/dev/null || true
  cat >"$work/rust-image/Dockerfile" <<DOCKERFILE
FROM sluice-local/debian:bookworm
COPY ca/ /usr/local/share/ca-certificates/
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev \\
 && rm -rf /var/lib/apt/lists/*
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo \\
    PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY rustup-init /tmp/rustup-init
RUN /tmp/rustup-init -y --no-modify-path --profile minimal --default-toolchain $rust && rm /tmp/rustup-init
DOCKERFILE
  say "making the Rust $rust build image"
  started="$(now)"
  DOCKER_BUILDKIT=1 "$DOCKER" build --progress plain --network host -t sluice-local/rust:bookworm \
    "$work/rust-image" >"$work/rust-image.log" 2>&1 || { tail -40 "$work/rust-image.log" >&2; return 1; }
  say "Rust image made in $(since "$started") s; building $image from source"
  started="$(now)"
  DOCKER_BUILDKIT=1 "$DOCKER" build --progress plain --network host -f deploy/Dockerfile \
    --build-arg RUST_IMAGE=sluice-local/rust:bookworm --build-arg SLUICE_GIT_COMMIT="$commit" \
    -t "$image" . >"$work/source-build.log" 2>&1 || { tail -40 "$work/source-build.log" >&2; return 1; }
  say "image built from source in $(since "$started") s"
  cid="$("$DOCKER" create "$image")"
  "$DOCKER" cp "$cid:/usr/local/bin/sluice" "$work/sluice-from-image"
  "$DOCKER" rm "$cid" >/dev/null
  bin="$work/sluice-from-image"
}

if { [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; } && docker_start; then
  commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [ -n "${SLUICE_DEPLOY_FROM_SOURCE:-}" ]; then
    build_from_source
  else
    build_prebuilt
  fi
  size="$("$DOCKER" image inspect --format '{{.Size}}' "$image")"
  say "image size: $size bytes ($(python3 -c "print(f'{$size/1e6:.1f}')") MB)"
  export SLUICE_DOCKER="$DOCKER" SLUICE_IMAGE="$image"
  # docker-compose (Debian's) validates and runs deploy/compose.yaml.
  if ! command -v docker-compose >/dev/null && ! "$DOCKER" compose version >/dev/null 2>&1; then
    say "installing docker-compose (Debian package)"
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq docker-compose >/dev/null 2>&1 || true
  fi
  if "$DOCKER" compose version >/dev/null 2>&1; then
    export SLUICE_COMPOSE="$DOCKER compose"
  elif command -v docker-compose >/dev/null; then
    export SLUICE_COMPOSE="docker-compose"
  else
    export SLUICE_COMPOSE_SKIPPED="neither docker compose nor docker-compose is available"
  fi
elif [ -z "${SLUICE_DOCKER_SKIPPED:-}" ]; then
  docker_skip "dockerd needs root (or passwordless sudo)"
fi

# ---- the checks ----------------------------------------------------------------------------
venv="$repo/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/deploy/requirements.txt
started="$(now)"
# The gateways' upstream is `sluice mock` from a build that has the mock provider (the image's
# binary has none): the test build's by default.
mock_bin="${SLUICE_MOCK_BIN:-$target/debug/sluice}"
if [ ! -x "$mock_bin" ]; then
  echo "deploy: no sluice with the mock provider at $mock_bin (cargo build --bin sluice, or set SLUICE_MOCK_BIN)" >&2
  exit 1
fi
SLUICE_BIN="$bin" SLUICE_MOCK_BIN="$(realpath "$mock_bin")" "$venv/bin/python" -m pytest tests/deploy -q -rs -s --tb=short -p no:cacheprovider
say "checks took $(since "$started") s"
