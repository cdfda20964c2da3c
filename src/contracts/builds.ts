// Names the parts of a source build agree on: the base images krane builds from Debian packages
// (scripts/build-bases.sh makes them; the builder hands them to BuildKit as named contexts, so
// generated Dockerfiles and users' own name them in FROM), and what a built image listens on.

/** A base image: the name a Dockerfile's FROM uses, and its tag in the bases' OCI layout. */
export interface BaseImage {
  /** What FROM names, e.g. "krane.local/base/node:20". */
  readonly name: string;
  /** The tag of its manifest in the bases' OCI layout (index.json's ref.name). */
  readonly tag: string;
  /** One line for people (`krane build` prints it, docs list it). */
  readonly about: string;
}

export const NODE_BASE: BaseImage = {
  name: "krane.local/base/node:20",
  tag: "node-20",
  about: "Node.js 20 and npm on Debian 12 (also serves static sites)",
};
export const PYTHON_BASE: BaseImage = {
  name: "krane.local/base/python:3.11",
  tag: "python-3.11",
  about: "Python 3.11 with venv and pip, Debian 12's",
};
export const GO_BASE: BaseImage = {
  name: "krane.local/base/go:1.26",
  tag: "go-1.26",
  about: "the Go 1.26 toolchain on Debian 12 (build stage)",
};
export const RUN_BASE: BaseImage = {
  name: "krane.local/base/run:12",
  tag: "run-12",
  about: "Debian 12's C runtime, dash, coreutils and CA certificates (runs a Go binary)",
};

export const BASE_IMAGES: readonly BaseImage[] = [NODE_BASE, PYTHON_BASE, GO_BASE, RUN_BASE];

/** The port a built image listens on unless the deploy says otherwise ($PORT is set to it). */
export const BUILT_IMAGE_PORT = 8080;

/** The non-root user every base image has, and generated images run as. */
export const BASE_USER = "65532:65532";

/** Where the node base keeps the static-site server generated images of static sites run. */
export const STATIC_SERVER = "/usr/local/lib/krane/static-server.mjs";

/**
 * Builder pods (src/agent/builds, in BUILDS_NAMESPACE of ./cluster.ts): the port of their gate,
 * and where the gate finds the daemon's socket and the build's key.
 */
export const BUILDER_GATE_PORT = 8050;
export const BUILDER_SOCKET = "/run/buildkit/buildkitd.sock";
export const BUILDER_KEY_FILE = "/etc/krane-builder/key";
/** The gate's compiled modules the builder image carries (under /usr/local/lib/krane). */
export const GATE_MODULES: readonly string[] = ["builds/gate-main.js", "builds/gate.js", "contracts/builds.js"];
/** The builder image as the local cluster's nodes know it (src/cluster/bases.ts builds it). */
export const LOCAL_BUILDER_IMAGE = "krane.local/builder:builder";
