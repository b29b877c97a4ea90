#!/usr/bin/env bash
# The build context for `deploy/Dockerfile --build-arg SLUICE_BINARY=prebuilt`, from a sluice
# binary built on the host: DIR/rootfs/ holds the stripped binary, the shared libraries and
# loader it needs when it is not static (a glibc build; a musl build needs none), the CA bundle
# and the default config (deploy/config.yaml), laid out as in the image.
#
#   bash deploy/docker-context.sh BINARY DIR
#   DOCKER_BUILDKIT=1 docker build -f deploy/Dockerfile --build-arg SLUICE_BINARY=prebuilt -t sluice DIR
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BINARY DIR" >&2
  exit 2
fi
bin="$1"
dir="$2"
repo="$(cd "$(dirname "$0")/.." && pwd)"
rootfs="$dir/rootfs"

rm -rf "$rootfs"
# /var/lib/sluice itself is made by the Dockerfile's WORKDIR, owned by the runtime user.
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/etc/sluice" "$rootfs/var/lib"
# The release profile keeps line tables for profiling; the image does not need them.
if command -v strip >/dev/null; then
  strip -o "$rootfs/usr/local/bin/sluice" "$bin"
else
  cp "$bin" "$rootfs/usr/local/bin/sluice"
fi
chmod 755 "$rootfs/usr/local/bin/sluice"

# A dynamically linked binary brings its libraries, each at the path the loader looks for it.
if ldd "$bin" >/dev/null 2>&1; then
  ldd "$bin" | while read -r first second third _; do
    lib=""
    if [ "$second" = "=>" ] && [ -n "$third" ] && [ "${third#/}" != "$third" ]; then
      lib="$third" # libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)
    elif [ "${first#/}" != "$first" ]; then
      lib="$first" # /lib64/ld-linux-x86-64.so.2 (0x...)
    fi
    [ -n "$lib" ] || continue
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
fi

for ca in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
  if [ -f "$ca" ]; then
    cp -L "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
    break
  fi
done
[ -f "$rootfs/etc/ssl/certs/ca-certificates.crt" ] ||
  echo "docker-context: no CA bundle on this host; sluice will use its bundled webpki roots" >&2

cp "$repo/deploy/config.yaml" "$rootfs/etc/sluice/config.yaml"
chmod 644 "$rootfs/etc/sluice/config.yaml"
