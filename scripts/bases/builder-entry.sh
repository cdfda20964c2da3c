#!/bin/sh
# The builder image's entry point (/usr/local/bin/builder-entry): the gate on the pod's network,
# and BuildKit's daemon in a user namespace of its own, without a network.
#
# A builder pod runs under gVisor with the default capabilities (no CAP_SYS_ADMIN: the agent's
# fence allows nothing more). As root of the sandbox this script first starts the gate
# (src/builds/gate.ts, compiled, with the image's Node.js) as 65532 with no capabilities: it
# serves buildkitd's unix socket to connections that hold the build's key ($KRANE_BUILDER_KEY_FILE,
# a Secret only this pod mounts). In the same container, not a second one: gVisor gives each
# container's mount of a shared emptyDir its own view, so a socket there does not reach the other
# container unless the node's runtime passes gVisor's mount annotations through.
#
# Then, with CAP_SETUID and CAP_SETGID (which the sandbox's root holds), it starts `unshare` into
# new user, mount, PID and network namespaces and writes the new user namespace's map itself (the
# sandbox's first 65536 uids and gids; Debian's newuidmap, which `unshare --map-users` needs, is
# not in the image). Inside, buildkitd holds every capability over those namespaces: it mounts
# /proc and the sandbox's cgroup hierarchies (gVisor's cgroupfs, which runc needs: without them
# runc fails with "no cgroup mount found") and runc makes each build step's container there, with
# the pod's cgroup bounding all of it. The network namespace is new and empty, so neither
# buildkitd nor any step reaches a network; what a build needs comes through its client's session
# (the context, the base images, secrets) over the gate. Options after the first argument go to
# buildkitd.
set -eu
if [ "${1:-}" = "--inside" ]; then
  shift
  mount -t proc proc /proc
  mount -t tmpfs cgroup /sys/fs/cgroup
  for c in cpu cpuacct cpuset devices memory pids; do
    mkdir -p "/sys/fs/cgroup/$c"
    mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"
  done
  exec buildkitd --addr unix:///run/buildkit/buildkitd.sock --root /var/lib/buildkit \
    --oci-worker-net host --group 65532 "$@"
fi
mkdir -p /run/buildkit /var/lib/buildkit
setpriv --reuid 65532 --regid 65532 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs \
  node /usr/local/lib/krane/builds/gate-main.js &
fifo=$(mktemp -u /tmp/builder-mapped.XXXXXX)
mkfifo "$fifo"
# The child waits on the fifo until its namespace has a map.
unshare --user --mount --pid --net --fork --propagation private --kill-child -- \
  /bin/sh -c 'read _ < "$0"; exec /usr/local/bin/builder-entry --inside "$@"' "$fifo" "$@" &
pid=$!
self=$(readlink /proc/self/ns/user)
i=0
while [ "$(readlink "/proc/$pid/ns/user" 2>/dev/null || echo "$self")" = "$self" ]; do
  i=$((i + 1))
  [ "$i" -lt 200 ] || { echo "builder-entry: unshare made no user namespace" >&2; exit 1; }
  sleep 0.05
done
echo "0 0 65536" > "/proc/$pid/uid_map"
echo "0 0 65536" > "/proc/$pid/gid_map"
echo mapped > "$fifo"
rm -f "$fifo"
trap 'kill -TERM "$pid" 2>/dev/null || true' TERM INT
wait "$pid"
