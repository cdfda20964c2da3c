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
