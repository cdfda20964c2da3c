# Sourced by scripts/build-bases.sh and scripts/build-image.sh: a Debian root filesystem from the
# mirror without pulling an image, and reproducible layer tars. Expects DEBIAN_SUITE, USER_ID
# and work (the scratch directory) to be set; DEBIAN_MIRROR and DEBIAN_SECURITY may be.
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY=${DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

# debian_extract DIR PACKAGES...: the packages (and what they depend on) extracted into DIR by
# mmdebstrap's extract variant, so no maintainer script runs; without docs, man pages, locales,
# apt's state, caches, logs, /dev and the build host's hostname, resolv.conf and fstab. The
# extract variant runs no dpkg: var/lib/dpkg/status.d/ (one control file per package, as
# distroless images have it) tells scanners and people which Debian packages are inside.
debian_extract() {
  local dir=$1; shift
  local mode=root
  [ "$(id -u)" = 0 ] || mode=unshare
  local include
  include=$(IFS=,; echo "$*")
  mmdebstrap --quiet --mode="$mode" --variant=extract --include="$include" \
    --skip=output/dev --skip=output/mknod \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --extract-hook='mkdir -p "$1/var/lib/dpkg/status.d" && for d in "$1"/var/cache/apt/archives/*.deb; do p=$(dpkg-deb -f "$d" Package); { dpkg-deb -f "$d"; echo "Status: install ok installed"; } > "$1/var/lib/dpkg/status.d/$p"; done' \
    "$DEBIAN_SUITE" "$dir" \
    "deb $DEBIAN_MIRROR $DEBIAN_SUITE main" "deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main" "deb $DEBIAN_SECURITY $DEBIAN_SUITE-security main" >&2
  rm -rf "$dir"/etc/apt "$dir"/var/lib/apt "$dir"/var/cache "$dir"/var/log "$dir"/dev "$dir"/etc/hostname "$dir"/etc/resolv.conf "$dir"/etc/fstab
}

# layer_tar DIR NAME MTIME: DIR as the uncompressed tar $work/NAME.tar, reproducible (sorted,
# dated MTIME, no access or change times) and owned by root, but for the user's home
# (home/nonroot), which is the user's.
layer_tar() {
  local excl=()
  [ -d "$1/home/nonroot" ] && excl=(--exclude=./home/nonroot)
  tar --sort=name --mtime="$3" --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$1" "${excl[@]}" -cf "$work/$2.tar" .
  if [ -d "$1/home/nonroot" ]; then
    tar --mtime="$3" --owner=$USER_ID --group=$USER_ID --numeric-owner --format=posix \
      --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$1" -rf "$work/$2.tar" ./home/nonroot
  fi
}
