#!/usr/bin/env bash
# Builds the builder image that source builds' builder pods run (src/agent/builds), from Debian
# packages without pulling any container image: Debian 12's runc, util-linux (unshare), mount,
# dash and coreutils, BuildKit's daemon (tools/buildkit) and scripts/bases/builder-entry.sh as
# the entry point, run as root (of the pod's gVisor sandbox). Output: OUT/builder.oci.tar, tag
# `builder` (the local cluster's nodes import it as krane.local/builder:builder).
#
#   scripts/build-builder.sh --out DIR --buildkitd PATH
#
# (scripts/build-bases.sh --buildkitd made this image beside the bases before; this replaces it,
# and the bases' script keeps its old part until the bases are next rebuilt.)
# Needs: root (or unprivileged user namespaces), mmdebstrap, umoci and the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_SUITE=bookworm
USER_ID=65532
CREATED=1970-01-01T00:00:00Z

out="" buildkitd=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --buildkitd) buildkitd=$2; shift 2 ;;
    *) echo "usage: $0 --out DIR --buildkitd PATH" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] && [ -n "$buildkitd" ] || { echo "usage: $0 --out DIR --buildkitd PATH" >&2; exit 2; }
for tool in mmdebstrap umoci tar; do
  command -v "$tool" >/dev/null || { echo "build-builder: $tool is missing" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)

. scripts/debian-rootfs.sh

root="$work/builder"
debian_extract "$root" libc6 dash coreutils runc util-linux mount
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
