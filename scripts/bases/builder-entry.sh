#!/bin/sh
# The builder image's entry point (/usr/local/bin/builder-entry): BuildKit's daemon in a user
# namespace of its own, without a network.
#
# A builder pod runs under gVisor with the default capabilities (no CAP_SYS_ADMIN: the agent's
# fence allows nothing more). As root of the sandbox this script maps the sandbox's first 65536
# uids and gids into a new user namespace, where buildkitd holds every capability over the mount,
# PID and network namespaces it creates next to it: runc can then make each build step's
# container there (rootless, as BuildKit runs when it finds itself in a user namespace, with the
# pod's cgroup bounding all of it). The network namespace is new and empty but for loopback, so
# neither buildkitd nor any step reaches a network; what a build needs comes through its client's
# session (the context, the base images, secrets) over the unix socket in /run/buildkit, which the
# pod's gate container (krane builder gate) serves to the agent. Options after the first
# argument go to buildkitd.
set -eu
mkdir -p /run/buildkit /var/lib/buildkit
exec unshare --map-users=0,0,65536 --map-groups=0,0,65536 --setgroups allow \
  --mount --pid --fork --net --mount-proc --propagation private -- \
  /bin/sh -c 'ip link set lo up 2>/dev/null || true; exec buildkitd "$@"' buildkitd \
  --addr unix:///run/buildkit/buildkitd.sock --root /var/lib/buildkit \
  --oci-worker-net host --group 0 "$@"
