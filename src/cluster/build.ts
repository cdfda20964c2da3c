// Builds the Go binaries krane's tests and local mode need, once, from pinned Go modules
// (tools/kube: the local Kubernetes; tools/helm: helm for the chart tests) into a cache outside
// the repository, and finds them again in a warm cache in well under a second.
//
// Each build is a GoBuildSpec (a module, its binaries, flags) listed in GO_BUILDS: adding a Go
// tool is one more spec there (or one more binary in a spec's list). The cache key hashes everything
// that decides the output (go.mod, go.sum, other sources, the build flags and the Go version),
// so a changed pin builds a fresh directory. A build is written to a temporary directory and
// renamed into place only after its manifest is written, so a partial build is never mistaken
// for a finished one; a finished one whose files no longer match the manifest (sizes), or that
// lacks a binary its spec lists, is rebuilt. The first build takes minutes, so it reports each
// step, how many are left and the time spent (progress.ts).
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { constants, existsSync } from "node:fs";
import { access, copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { isAlive } from "./process.js";
import { Progress, formatDuration } from "./progress.js";

const run = promisify(execFile);

export const KUBE_VERSION = "v1.36.3";
export const HELM_VERSION = "v4.2.4";
const MIN_GO = [1, 26] as const;

/** tools/kube: the Go wrapper module (go.mod and go.sum pinned). */
export const kubeModuleDir = fileURLToPath(new URL("../../tools/kube/", import.meta.url));
/** tools/helm: pins helm (go.mod and go.sum). */
export const helmModuleDir = fileURLToPath(new URL("../../tools/helm/", import.meta.url));

export const BINARIES = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kubectl",
  "kwok",
] as const;
export type BinaryName = (typeof BINARIES)[number];

const PACKAGES: Record<BinaryName, string> = {
  etcd: "./etcd",
  "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
  "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
  "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
  kubectl: "k8s.io/kubernetes/cmd/kubectl",
  kwok: "sigs.k8s.io/kwok/cmd/kwok",
};

/** KWOK's own stage definitions (from its module) that make nodes Ready and pods Running. */
const KWOK_STAGES = [
  "kustomize/stage/node/fast/node-initialize.yaml",
  "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
  "kustomize/stage/pod/fast/pod-ready.yaml",
  "kustomize/stage/pod/fast/pod-complete.yaml",
  "kustomize/stage/pod/fast/pod-delete.yaml",
];

/** Gateway API CRDs, as the gateway-api module ships them. */
const GATEWAY_CRDS = [
  "gateway.networking.k8s.io_gatewayclasses.yaml",
  "gateway.networking.k8s.io_gateways.yaml",
  "gateway.networking.k8s.io_httproutes.yaml",
  "gateway.networking.k8s.io_referencegrants.yaml",
];

/** One cached build of Go binaries from one pinned module. */
export interface GoBuildSpec {
  /** The cache directory is `<name>-<key>` under cacheRoot(), e.g. "kube-v1.36.3". */
  readonly name: string;
  /** What progress lines call it. */
  readonly title: string;
  readonly moduleDir: string;
  /** Output file name and Go package, in build order. */
  readonly binaries: readonly (readonly [name: string, pkg: string])[];
  readonly tags: string;
  readonly ldflags: string;
  /** Files under moduleDir whose contents decide the output (hashed into the key, in order). */
  readonly keyFiles: readonly string[];
  /** Further strings hashed into the key after the flags and the Go version. */
  readonly keyExtras: readonly string[];
  /** A cold build's typical time on 2 cores, said before it starts. */
  readonly coldEstimate: string;
  /** Copies files other than binaries into the build; returns their paths relative to it. */
  readonly extras?: (out: string, moduleDir: (mod: string) => Promise<string>) => Promise<string[]>;
}

function kubeLdflags(): string {
  const [major, minor] = KUBE_VERSION.slice(1).split(".");
  const v = (pkg: string, key: string, value: string) => `-X ${pkg}.${key}=${value}`;
  return [
    "-s -w",
    v("k8s.io/component-base/version", "gitVersion", KUBE_VERSION),
    v("k8s.io/component-base/version", "gitMajor", major ?? "1"),
    v("k8s.io/component-base/version", "gitMinor", minor ?? "0"),
    v("k8s.io/component-base/version", "gitTreeState", "clean"),
    v("k8s.io/client-go/pkg/version", "gitVersion", KUBE_VERSION),
    v("k8s.io/client-go/pkg/version", "gitMajor", major ?? "1"),
    v("k8s.io/client-go/pkg/version", "gitMinor", minor ?? "0"),
  ].join(" ");
}

/** The local Kubernetes: control plane, kubectl and KWOK, plus KWOK stages and Gateway API CRDs. */
export const KUBE_BUILD: GoBuildSpec = {
  name: `kube-${KUBE_VERSION}`,
  title: `the local Kubernetes ${KUBE_VERSION}`,
  moduleDir: kubeModuleDir,
  binaries: BINARIES.map((b) => [b, PACKAGES[b]] as const),
  tags: "selinux,notest",
  ldflags: kubeLdflags(),
  keyFiles: ["go.mod", "go.sum", "etcd/main.go"],
  keyExtras: [KWOK_STAGES.join(), GATEWAY_CRDS.join()],
  coldEstimate: "about 6–8 minutes",
  async extras(out, moduleDir) {
    await mkdir(join(out, "kwok"), { recursive: true });
    await mkdir(join(out, "crds"), { recursive: true });
    const kwokDir = await moduleDir("sigs.k8s.io/kwok");
    const gatewayDir = await moduleDir("sigs.k8s.io/gateway-api");
    const files: string[] = [];
    for (const [i, rel] of KWOK_STAGES.entries()) {
      await copyFile(join(kwokDir, rel), join(out, "kwok", `stage-${i}.yaml`));
      files.push(`kwok/stage-${i}.yaml`);
    }
    for (const f of GATEWAY_CRDS) {
      await copyFile(join(gatewayDir, "config/crd/standard", f), join(out, "crds", f));
      files.push(`crds/${f}`);
    }
    return files;
  },
};

/** helm, for the chart's tests (lint, template, install against the local cluster). */
export const HELM_BUILD: GoBuildSpec = {
  name: `helm-${HELM_VERSION}`,
  title: `helm ${HELM_VERSION}`,
  moduleDir: helmModuleDir,
  binaries: [["helm", "helm.sh/helm/v4/cmd/helm"]],
  tags: "",
  // Without the version stamp `helm version` says only "v4.2".
  ldflags: `-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}`,
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: [],
  coldEstimate: "about 2–3 minutes",
};

/** tools/rollout-conformance: a test tool running the real Deployment controller's sync pass. */
export const ROLLOUT_HARNESS_BUILD: GoBuildSpec = {
  name: `rollout-conformance-${KUBE_VERSION}`,
  title: `the rollout conformance harness (Deployment controller of Kubernetes ${KUBE_VERSION})`,
  moduleDir: fileURLToPath(new URL("../../tools/rollout-conformance/", import.meta.url)),
  binaries: [["rollout-conformance", "."]],
  // The Kubernetes build's tags, so the packages both compile come from Go's build cache.
  tags: "selinux,notest",
  ldflags: "",
  keyFiles: ["go.mod", "go.sum", "main.go"],
  keyExtras: [],
  coldEstimate: "seconds after the Kubernetes build, about 5 minutes alone",
};

export const SECRETS_STORE_VERSION = "v1.6.0";

/**
 * The Secrets Store CSI driver's CRDs, as its module ships them: the SecretProviderClass the agent
 * renders for external secrets, and the per-pod status the driver writes when it mounts one.
 */
const SECRETS_STORE_CRDS = [
  "secrets-store.csi.x-k8s.io_secretproviderclasses.yaml",
  "secrets-store.csi.x-k8s.io_secretproviderclasspodstatuses.yaml",
];
const secretsStoreModuleDir = fileURLToPath(new URL("../../tools/secrets-store/", import.meta.url));

/**
 * tools/secrets-store: no binary, only the Secrets Store CSI driver's CRDs, copied from the pinned
 * module (krane's external secrets are validated against them). Its own small spec, so adding it
 * did not change the Kubernetes build's cache key, and a cluster without the driver does not wait
 * for the driver's build.
 */
export const SECRETS_STORE_BUILD: GoBuildSpec = {
  name: "secrets-store-crds",
  title: "the Secrets Store CSI driver's CRDs",
  moduleDir: secretsStoreModuleDir,
  binaries: [],
  tags: "",
  ldflags: "",
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: [SECRETS_STORE_CRDS.join()],
  coldEstimate: "seconds",
  async extras(out, moduleDir) {
    await mkdir(join(out, "crds"), { recursive: true });
    const dir = await moduleDir("sigs.k8s.io/secrets-store-csi-driver");
    for (const f of SECRETS_STORE_CRDS) await copyFile(join(dir, "config/crd/bases", f), join(out, "crds", f));
    return SECRETS_STORE_CRDS.map((f) => `crds/${f}`);
  },
};

/**
 * tools/secrets-store: the Secrets Store CSI driver's own command, built unchanged from the same
 * pinned module, and the driver project's test provider (provider/fake) behind a small main of
 * ours (tools/secrets-store/README.md), for clusters started with `secretsStore`
 * (./secrets-store.ts).
 */
export const SECRETS_STORE_DRIVER_BUILD: GoBuildSpec = {
  name: `secrets-store-driver-${SECRETS_STORE_VERSION}`,
  title: `the Secrets Store CSI driver ${SECRETS_STORE_VERSION} and its test provider`,
  moduleDir: secretsStoreModuleDir,
  binaries: [
    ["secrets-store-csi-driver", "sigs.k8s.io/secrets-store-csi-driver/cmd/secrets-store-csi-driver"],
    ["fake-provider", "./fake-provider"],
  ],
  tags: "",
  ldflags: `-s -w -X sigs.k8s.io/secrets-store-csi-driver/pkg/version.BuildVersion=${SECRETS_STORE_VERSION}`,
  keyFiles: ["go.mod", "go.sum", "fake-provider/main.go", "mlog/mlog.go"],
  keyExtras: [],
  coldEstimate: "about 3–5 minutes",
};

/**
 * tools/csi-registrar: registers a node-local CSI driver with a real node's kubelet (the job of
 * node-driver-registrar, whose module this build cannot fetch; tools/csi-registrar/README.md).
 */
export const CSI_REGISTRAR_BUILD: GoBuildSpec = {
  name: "csi-registrar",
  title: "the CSI driver registrar of real nodes",
  moduleDir: fileURLToPath(new URL("../../tools/csi-registrar/", import.meta.url)),
  binaries: [["csi-registrar", "."]],
  tags: "",
  ldflags: "-s -w",
  keyFiles: ["go.mod", "go.sum", "main.go"],
  keyExtras: [],
  coldEstimate: "about a minute",
};

/** The Secrets Store CSI driver, its test provider and the registrar (built on first use). */
export async function ensureSecretsStoreDriver(
  log: (line: string) => void = () => {},
): Promise<{ driver: string; provider: string; registrar: string }> {
  const dir = await ensureGoBuild(SECRETS_STORE_DRIVER_BUILD, log);
  const reg = await ensureGoBuild(CSI_REGISTRAR_BUILD, log);
  return {
    driver: join(dir, "bin", "secrets-store-csi-driver"),
    provider: join(dir, "bin", "fake-provider"),
    registrar: join(reg, "bin", "csi-registrar"),
  };
}

/** cert-manager's Certificate and Envoy Gateway's policy CRDs, as their modules ship them. */
const EXPOSURE_CRDS = [
  ["github.com/cert-manager/cert-manager", "deploy/crds/cert-manager.io_certificates.yaml"],
  ["github.com/envoyproxy/gateway", "charts/gateway-helm/crds/generated/gateway.envoyproxy.io_securitypolicies.yaml"],
  ["github.com/envoyproxy/gateway", "charts/gateway-helm/crds/generated/gateway.envoyproxy.io_httproutefilters.yaml"],
] as const;

/**
 * tools/exposure-crds: no binary, only the CRDs of the objects the gateway kind renders besides
 * Gateway API's (cert-manager v1.21.1, Envoy Gateway v1.6.0), so the local API server validates
 * them exactly as a cluster running those controllers would.
 */
export const EXPOSURE_CRDS_BUILD: GoBuildSpec = {
  name: "exposure-crds",
  title: "the cert-manager and Envoy Gateway CRDs",
  moduleDir: fileURLToPath(new URL("../../tools/exposure-crds/", import.meta.url)),
  binaries: [],
  tags: "",
  ldflags: "",
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: [EXPOSURE_CRDS.map(([m, f]) => `${m}/${f}`).join()],
  coldEstimate: "under a minute (module downloads only)",
  async extras(out, moduleDir) {
    await mkdir(join(out, "crds"), { recursive: true });
    const files: string[] = [];
    for (const [mod, rel] of EXPOSURE_CRDS) {
      const name = rel.split("/").pop() ?? rel;
      await copyFile(join(await moduleDir(mod), rel), join(out, "crds", name));
      files.push(`crds/${name}`);
    }
    return files;
  },
};

/** The CRD files of the exposure build (built on first use). */
export async function ensureExposureCrds(log: (line: string) => void = () => {}): Promise<string[]> {
  const dir = await ensureGoBuild(EXPOSURE_CRDS_BUILD, log);
  return EXPOSURE_CRDS.map(([, rel]) => join(dir, "crds", rel.split("/").pop() ?? rel));
}

export const TRAEFIK_VERSION = "v3.6.12";

/** Gateway API CRDs Traefik's provider watches besides the ones KUBE_BUILD installs (v1.4.0, Traefik's pin). */
const TRAEFIK_EXTRA_CRDS = [
  "gateway.networking.k8s.io_grpcroutes.yaml",
  "gateway.networking.k8s.io_backendtlspolicies.yaml",
];

/**
 * tools/traefik: Traefik, a Gateway API implementation in one Go binary (its data plane is Go
 * too), for tests that send traffic through a real Gateway (./gateway.ts). Built only by
 * `krane cluster build` and by the first test that asks for it; about 10-15 CPU-minutes cold.
 */
export const TRAEFIK_BUILD: GoBuildSpec = {
  name: `traefik-${TRAEFIK_VERSION}`,
  title: `Traefik ${TRAEFIK_VERSION} (the local cluster's Gateway)`,
  moduleDir: fileURLToPath(new URL("../../tools/traefik/", import.meta.url)),
  binaries: [["traefik", "github.com/traefik/traefik/v3/cmd/traefik"]],
  tags: "",
  ldflags: `-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=${TRAEFIK_VERSION}`,
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: [TRAEFIK_EXTRA_CRDS.join()],
  coldEstimate: "about 10-15 minutes",
  async extras(out, moduleDir) {
    await mkdir(join(out, "crds"), { recursive: true });
    const gatewayDir = await moduleDir("sigs.k8s.io/gateway-api");
    for (const f of TRAEFIK_EXTRA_CRDS)
      await copyFile(join(gatewayDir, "config/crd/standard", f), join(out, "crds", f));
    return TRAEFIK_EXTRA_CRDS.map((f) => `crds/${f}`);
  },
};

/** Traefik's binary and the extra CRDs its Gateway API provider needs (built on first use). */
export async function ensureTraefik(log: (line: string) => void = () => {}): Promise<{ bin: string; crds: string[] }> {
  const dir = await ensureGoBuild(TRAEFIK_BUILD, log);
  return { bin: join(dir, "bin", "traefik"), crds: TRAEFIK_EXTRA_CRDS.map((f) => join(dir, "crds", f)) };
}

export const CERT_MANAGER_VERSION = "v1.21.1";

/** cert-manager's CRDs (every kind its controllers watch), as its module ships them. */
const CERT_MANAGER_CRDS = [
  "cert-manager.io_certificates.yaml",
  "cert-manager.io_certificaterequests.yaml",
  "cert-manager.io_issuers.yaml",
  "cert-manager.io_clusterissuers.yaml",
  "acme.cert-manager.io_orders.yaml",
  "acme.cert-manager.io_challenges.yaml",
];

/**
 * tools/cert-manager: cert-manager's certificate controllers (the library module at
 * CERT_MANAGER_VERSION, started by tools/cert-manager/main.go; its README says why not the
 * upstream binary's module) and all its CRDs, for the local cluster's TLS (./gateway/tls.ts).
 */
export const CERT_MANAGER_BUILD: GoBuildSpec = {
  name: `cert-manager-${CERT_MANAGER_VERSION}`,
  title: `cert-manager ${CERT_MANAGER_VERSION} (the local cluster's certificates)`,
  moduleDir: fileURLToPath(new URL("../../tools/cert-manager/", import.meta.url)),
  binaries: [["cert-manager-controller", "."]],
  tags: "",
  ldflags: "-s -w",
  keyFiles: ["go.mod", "go.sum", "main.go"],
  keyExtras: [CERT_MANAGER_CRDS.join()],
  coldEstimate: "about 10 CPU-minutes (about 5 minutes on 2 idle cores)",
  async extras(out, moduleDir) {
    await mkdir(join(out, "crds"), { recursive: true });
    const dir = await moduleDir("github.com/cert-manager/cert-manager");
    for (const f of CERT_MANAGER_CRDS) await copyFile(join(dir, "deploy/crds", f), join(out, "crds", f));
    return CERT_MANAGER_CRDS.map((f) => `crds/${f}`);
  },
};

/** cert-manager's controller binary and CRD files (built on first use). */
export async function ensureCertManager(
  log: (line: string) => void = () => {},
): Promise<{ bin: string; crds: string[] }> {
  const dir = await ensureGoBuild(CERT_MANAGER_BUILD, log);
  return { bin: join(dir, "bin", "cert-manager-controller"), crds: CERT_MANAGER_CRDS.map((f) => join(dir, "crds", f)) };
}

/**
 * tools/kube-node: the kubelet and kube-proxy of the real nodes (./nodes), from the same
 * Kubernetes module version as the control plane. Its own module, so the control plane's pin
 * and cache key did not change; Go's build cache shares the packages both compile.
 */
export const KUBE_NODE_BUILD: GoBuildSpec = {
  name: `kube-node-${KUBE_VERSION}`,
  title: `the kubelet and kube-proxy ${KUBE_VERSION}`,
  moduleDir: fileURLToPath(new URL("../../tools/kube-node/", import.meta.url)),
  binaries: [
    ["kubelet", "k8s.io/kubernetes/cmd/kubelet"],
    ["kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy"],
  ],
  tags: "selinux,notest",
  ldflags: kubeLdflags(),
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: ["pause: gcc -Os -static"],
  coldEstimate: "about 2–4 minutes after the Kubernetes build, longer alone",
  // The pod sandbox's process: Kubernetes' own pause.c from the same module, compiled static.
  async extras(out, moduleDir) {
    const src = join(await moduleDir("k8s.io/kubernetes"), "build", "pause", "linux", "pause.c");
    await run("gcc", [
      "-Os",
      "-static",
      "-Wall",
      "-Werror",
      `-DVERSION=${KUBE_VERSION}-krane`,
      "-o",
      join(out, "bin", "pause"),
      src,
    ]);
    await run("strip", [join(out, "bin", "pause")]);
    return ["bin/pause"];
  },
};

export const CONTAINERD_VERSION = "v2.3.7";

/**
 * tools/containerd: the real nodes' CRI runtime (containerd 2.3 supports Kubernetes 1.36;
 * Debian 12's 1.6 does not), its runc shim and ctr (which imports images into a node).
 */
export const CONTAINERD_BUILD: GoBuildSpec = {
  name: `containerd-${CONTAINERD_VERSION}`,
  title: `containerd ${CONTAINERD_VERSION}`,
  moduleDir: fileURLToPath(new URL("../../tools/containerd/", import.meta.url)),
  binaries: [
    ["containerd", "github.com/containerd/containerd/v2/cmd/containerd"],
    ["containerd-shim-runc-v2", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"],
    ["ctr", "github.com/containerd/containerd/v2/cmd/ctr"],
  ],
  tags: "no_btrfs,no_devmapper,no_zfs",
  ldflags: `-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}`,
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: [],
  coldEstimate: "about 3–4 minutes",
};

export const GVISOR_VERSION = "release-20260520.0-41 (go branch a81fd9dd382e)";

/**
 * tools/gvisor: gVisor's runsc and its containerd shim, which runs all containers of a pod in
 * one sandbox and reports each container's exit (containerd's runc shim driving runsc would take
 * the sandbox's pid for every container), started by a Start of ours that tolerates a machine
 * without CAP_SYS_RESOURCE (tools/gvisor/main.go). runsc comes from the same module version
 * rather than Debian 12's package (2022-12-19), which cannot start a pod with networking on
 * Linux 6.x (tools/gvisor/go.mod says why).
 */
export const GVISOR_BUILD: GoBuildSpec = {
  name: "gvisor",
  title: `gVisor ${GVISOR_VERSION}: runsc and its containerd shim`,
  moduleDir: fileURLToPath(new URL("../../tools/gvisor/", import.meta.url)),
  binaries: [
    ["containerd-shim-runsc-v1", "."],
    ["runsc", "gvisor.dev/gvisor/runsc"],
  ],
  tags: "",
  ldflags: `-s -w -X gvisor.dev/gvisor/runsc/version.version=${GVISOR_VERSION.replace(/ .*/, "")}`,
  keyFiles: ["go.mod", "go.sum", "main.go"],
  keyExtras: [],
  coldEstimate: "about 5–8 minutes",
};

export const BUILDKIT_VERSION = "v0.34.2";

/**
 * tools/buildkit: BuildKit's daemon and client, the builder of source builds (src/builds). A
 * wrapper module because BuildKit's go.mod has `exclude` lines, which `go install` refuses.
 * buildkitd runs its steps with runc (Debian's, as the real nodes use); its Dockerfile frontend
 * is compiled in, so a Dockerfile without `# syntax=` builds without pulling anything.
 */
export const BUILDKIT_BUILD: GoBuildSpec = {
  name: `buildkit-${BUILDKIT_VERSION}`,
  title: `BuildKit ${BUILDKIT_VERSION} (buildkitd and buildctl)`,
  moduleDir: fileURLToPath(new URL("../../tools/buildkit/", import.meta.url)),
  binaries: [
    ["buildkitd", "github.com/moby/buildkit/cmd/buildkitd"],
    ["buildctl", "github.com/moby/buildkit/cmd/buildctl"],
  ],
  tags: "",
  ldflags: [
    "-s -w",
    `-X github.com/moby/buildkit/version.Version=${BUILDKIT_VERSION}`,
    "-X github.com/moby/buildkit/version.Package=github.com/moby/buildkit",
  ].join(" "),
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: [],
  coldEstimate: "about 6–9 minutes",
};

/** buildkitd and buildctl (built on first use). */
export async function ensureBuildkit(
  log: (line: string) => void = () => {},
): Promise<{ buildkitd: string; buildctl: string }> {
  const dir = await ensureGoBuild(BUILDKIT_BUILD, log);
  return { buildkitd: join(dir, "bin", "buildkitd"), buildctl: join(dir, "bin", "buildctl") };
}

export const COREDNS_VERSION = "v1.14.7";

/** tools/coredns: the cluster DNS of clusters with real nodes (Service names resolve in pods). */
export const COREDNS_BUILD: GoBuildSpec = {
  name: `coredns-${COREDNS_VERSION}`,
  title: `CoreDNS ${COREDNS_VERSION}`,
  moduleDir: fileURLToPath(new URL("../../tools/coredns/", import.meta.url)),
  binaries: [["coredns", "github.com/coredns/coredns"]],
  tags: "",
  ldflags: "-s -w",
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: [],
  coldEstimate: "about 4–6 minutes",
};

export const METRICS_SERVER_VERSION = "v0.8.0";

/** metrics-server's own manifests the local cluster applies: its RBAC and its APIService. */
const METRICS_SERVER_MANIFESTS = ["rbac.yaml", "apiservice.yaml"] as const;

/**
 * tools/metrics-server: metrics-server, Kubernetes' resource metrics API (metrics.k8s.io
 * PodMetrics and NodeMetrics, read from the kubelets), built unchanged from its Go module, with
 * its RBAC and APIService manifests from the same module, for clusters started with `metrics`
 * (./metrics.ts).
 */
export const METRICS_SERVER_BUILD: GoBuildSpec = {
  name: `metrics-server-${METRICS_SERVER_VERSION}`,
  title: `metrics-server ${METRICS_SERVER_VERSION}`,
  moduleDir: fileURLToPath(new URL("../../tools/metrics-server/", import.meta.url)),
  binaries: [["metrics-server", "sigs.k8s.io/metrics-server/cmd/metrics-server"]],
  tags: "",
  // As metrics-server's own Makefile stamps it (`metrics-server --version`, /version).
  ldflags: `-s -w -X k8s.io/client-go/pkg/version.gitVersion=${METRICS_SERVER_VERSION}`,
  keyFiles: ["go.mod", "go.sum"],
  keyExtras: [METRICS_SERVER_MANIFESTS.join()],
  coldEstimate: "about 3–5 minutes",
  async extras(out, moduleDir) {
    await mkdir(join(out, "manifests"), { recursive: true });
    const dir = await moduleDir("sigs.k8s.io/metrics-server");
    for (const f of METRICS_SERVER_MANIFESTS) await copyFile(join(dir, "manifests/base", f), join(out, "manifests", f));
    return METRICS_SERVER_MANIFESTS.map((f) => `manifests/${f}`);
  },
};

/** metrics-server's binary and the manifests of its RBAC and APIService (built on first use). */
export async function ensureMetricsServer(
  log: (line: string) => void = () => {},
): Promise<{ bin: string; rbac: string; apiService: string }> {
  const dir = await ensureGoBuild(METRICS_SERVER_BUILD, log);
  return {
    bin: join(dir, "bin", "metrics-server"),
    rbac: join(dir, "manifests", "rbac.yaml"),
    apiService: join(dir, "manifests", "apiservice.yaml"),
  };
}

export const REGISTRY_VERSION = "v3.1.2";

/**
 * tools/registry: the distribution project's registry (the OCI registry behind Docker Hub and
 * Harbor), built unchanged from its Go module, and a small htpasswd writer (bcrypt, which the
 * registry's htpasswd auth requires), for the private-registry tests (test/support/registry.ts).
 */
export const REGISTRY_BUILD: GoBuildSpec = {
  name: `registry-${REGISTRY_VERSION}`,
  title: `the registry ${REGISTRY_VERSION} (distribution) and an htpasswd writer`,
  moduleDir: fileURLToPath(new URL("../../tools/registry/", import.meta.url)),
  binaries: [
    ["registry", "github.com/distribution/distribution/v3/cmd/registry"],
    ["htpasswd", "./htpasswd"],
  ],
  tags: "",
  ldflags: `-s -w -X github.com/distribution/distribution/v3/version.version=${REGISTRY_VERSION}`,
  keyFiles: ["go.mod", "go.sum", "htpasswd/main.go"],
  keyExtras: [],
  coldEstimate: "about 3–5 minutes",
};

/** The registry binary and the htpasswd writer (built on first use). */
export async function ensureRegistry(
  log: (line: string) => void = () => {},
): Promise<{ bin: string; htpasswd: string }> {
  const dir = await ensureGoBuild(REGISTRY_BUILD, log);
  return { bin: join(dir, "bin", "registry"), htpasswd: join(dir, "bin", "htpasswd") };
}

/** Everything `krane cluster build` (and so `.ci/run`) builds; a new Go tool is one more entry. */
export const GO_BUILDS: readonly GoBuildSpec[] = [
  KUBE_BUILD,
  HELM_BUILD,
  ROLLOUT_HARNESS_BUILD,
  SECRETS_STORE_BUILD,
  SECRETS_STORE_DRIVER_BUILD,
  CSI_REGISTRAR_BUILD,
  EXPOSURE_CRDS_BUILD,
  TRAEFIK_BUILD,
  CERT_MANAGER_BUILD,
  KUBE_NODE_BUILD,
  CONTAINERD_BUILD,
  GVISOR_BUILD,
  BUILDKIT_BUILD,
  COREDNS_BUILD,
  METRICS_SERVER_BUILD,
  REGISTRY_BUILD,
];

export interface KubeAssets {
  dir: string;
  bin: Record<BinaryName, string>;
  /** Files of KWOK Stage objects (multi-document YAML). */
  kwokStages: string[];
  /** CRD manifests to install (Gateway API). */
  crds: string[];
}

export interface HelmAssets {
  dir: string;
  /** The helm executable. */
  bin: string;
}

interface Manifest {
  version: string;
  go: string;
  builtAt: string;
  buildSeconds: number;
  files: Record<string, number>;
}

export function cacheRoot(): string {
  if (process.env.KRANE_CACHE_DIR) return process.env.KRANE_CACHE_DIR;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "krane");
}

function goEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    GOTOOLCHAIN: "local",
    GOWORK: "off",
    CGO_ENABLED: "0",
    GOFLAGS: "-mod=readonly -buildvcs=false",
  };
}

export class GoMissingError extends Error {}

/** The Go toolchain's version, or a message saying what to install. */
export async function goVersion(): Promise<string> {
  let out: string;
  try {
    out = (await run("go", ["env", "GOVERSION"], { env: goEnv() })).stdout.trim();
  } catch {
    throw new GoMissingError(
      "the local Kubernetes is built from Go modules and needs the Go toolchain (1.26 or newer), " +
        "which is not on PATH. Install it from https://go.dev/dl/ (Debian's golang-go is too old), " +
        "or point krane at a cluster of your own with --kubeconfig.",
    );
  }
  const m = /^go(\d+)\.(\d+)/.exec(out);
  if (!m || Number(m[1]) < MIN_GO[0] || (Number(m[1]) === MIN_GO[0] && Number(m[2]) < MIN_GO[1])) {
    throw new GoMissingError(
      `Go ${MIN_GO.join(".")} or newer is needed to build the local Kubernetes; found ${out}. Install a newer Go from https://go.dev/dl/.`,
    );
  }
  return out;
}

async function cacheKey(spec: GoBuildSpec, go: string): Promise<string> {
  const h = createHash("sha256");
  for (const f of spec.keyFiles) h.update(await readFile(join(spec.moduleDir, f)));
  h.update(spec.ldflags).update(go);
  for (const x of spec.keyExtras) h.update(x);
  return h.digest("hex").slice(0, 12);
}

async function buildDir(spec: GoBuildSpec, go: string): Promise<string> {
  return join(cacheRoot(), `${spec.name}-${await cacheKey(spec, go)}`);
}

function kubeAssetsIn(dir: string): KubeAssets {
  const bin = Object.fromEntries(BINARIES.map((b) => [b, join(dir, "bin", b)])) as Record<BinaryName, string>;
  return {
    dir,
    bin,
    kwokStages: KWOK_STAGES.map((_, i) => join(dir, "kwok", `stage-${i}.yaml`)),
    crds: GATEWAY_CRDS.map((f) => join(dir, "crds", f)),
  };
}

/** True when every file the manifest lists is present with its recorded size, and every binary the spec lists is there. */
async function verify(spec: GoBuildSpec, dir: string): Promise<boolean> {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as Manifest;
  } catch {
    return false;
  }
  if (spec.binaries.some(([name]) => !(`bin/${name}` in manifest.files))) return false;
  // A build without binaries (CRDs only) is whatever its manifest lists.
  for (const [rel, size] of Object.entries(manifest.files)) {
    try {
      const s = await stat(join(dir, rel));
      if (s.size !== size) return false;
      if (rel.startsWith("bin/")) await access(join(dir, rel), constants.X_OK);
    } catch {
      return false;
    }
  }
  return Object.keys(manifest.files).length > 0;
}

/** The directory of a finished build of `spec`, if the cache has one; never builds. */
export async function findGoBuild(spec: GoBuildSpec): Promise<string | undefined> {
  const dir = await buildDir(spec, await goVersion());
  return (await verify(spec, dir)) ? dir : undefined;
}

/** The cache directory of a finished build, if there is one; never builds. */
export async function findKubeAssets(): Promise<KubeAssets | undefined> {
  const dir = await findGoBuild(KUBE_BUILD);
  const extra = await findGoBuild(SECRETS_STORE_BUILD);
  return dir === undefined || extra === undefined ? undefined : withExtraCrds(kubeAssetsIn(dir), extra);
}

function withExtraCrds(assets: KubeAssets, secretsStoreDir: string): KubeAssets {
  return { ...assets, crds: [...assets.crds, ...SECRETS_STORE_CRDS.map((f) => join(secretsStoreDir, "crds", f))] };
}

export async function withLock<T>(lockDir: string, fn: () => Promise<T>, log: (line: string) => void): Promise<T> {
  await mkdir(join(lockDir, ".."), { recursive: true });
  let told = false;
  for (;;) {
    try {
      await mkdir(lockDir);
      await writeFile(join(lockDir, "pid"), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const holder = Number(await readFile(join(lockDir, "pid"), "utf8").catch(() => "0"));
      if (holder > 0 && !isAlive(holder)) {
        await rm(lockDir, { recursive: true, force: true });
        continue;
      }
      if (!told) log(`waiting for another build into ${lockDir.replace(/\.lock$/, "")} (pid ${holder || "?"})`);
      told = true;
      await sleep(1000);
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lockDir, { recursive: true, force: true });
  }
}

/** The directory of a finished build of `spec`, building it first when the cache lacks one. */
export async function ensureGoBuild(spec: GoBuildSpec, log: (line: string) => void = () => {}): Promise<string> {
  const go = await goVersion();
  const dir = await buildDir(spec, go);
  if (await verify(spec, dir)) return dir;
  await withLock(
    `${dir}.lock`,
    async () => {
      if (!(await verify(spec, dir))) await build(spec, dir, go, log);
    },
    log,
  );
  return dir;
}

/**
 * Returns the binaries and manifests of the local Kubernetes, building them first when the
 * cache does not hold a complete build (a cold build takes 6–8 minutes on 2 cores).
 */
export async function ensureKubeAssets(log: (line: string) => void = () => {}): Promise<KubeAssets> {
  const kube = kubeAssetsIn(await ensureGoBuild(KUBE_BUILD, log));
  return withExtraCrds(kube, await ensureGoBuild(SECRETS_STORE_BUILD, log));
}

/** helm from tools/helm, built on first use. */
export async function ensureHelm(log: (line: string) => void = () => {}): Promise<HelmAssets> {
  const dir = await ensureGoBuild(HELM_BUILD, log);
  return { dir, bin: join(dir, "bin", "helm") };
}

/**
 * Removes `<dir>.tmp-<pid>` directories of builds whose process is gone (killed mid-build): the
 * lock of a dead builder is taken over, but its half-built directory would stay forever.
 */
export async function removeDeadBuilds(dir: string): Promise<void> {
  const prefix = `${basename(dir)}.tmp-`;
  for (const name of await readdir(dirname(dir)).catch(() => [])) {
    const pid = name.startsWith(prefix) ? name.slice(prefix.length) : "";
    if (!/^[1-9][0-9]*$/.test(pid)) continue;
    if (Number(pid) === process.pid || !isAlive(Number(pid)))
      await rm(join(dirname(dir), name), { recursive: true, force: true });
  }
}

async function build(spec: GoBuildSpec, dir: string, go: string, log: (line: string) => void): Promise<void> {
  const started = Date.now();
  const tmp = `${dir}.tmp-${process.pid}`;
  await removeDeadBuilds(dir);
  if (existsSync(dir)) {
    log(`the cached build in ${dir} is incomplete or damaged; rebuilding`);
    await rm(dir, { recursive: true, force: true });
  }
  await mkdir(join(tmp, "bin"), { recursive: true });
  const names = spec.binaries.map(([name]) => name);
  log(
    `building ${spec.title} from source with ${go}: ${names.length} binar${names.length === 1 ? "y" : "ies"} (${names.join(", ")}). ` +
      `The first build takes ${spec.coldEstimate} on 2 cores; later runs reuse ${dir}.`,
  );
  const progress = new Progress(1 + names.length + (spec.extras ? 1 : 0), { log });
  const opts = { cwd: spec.moduleDir, env: goEnv(), maxBuffer: 64 * 1024 * 1024 };
  const files: string[] = [];
  let current = "downloading Go modules";
  try {
    await progress.step(current, () => run("go", ["mod", "download"], opts));
    for (const [name, pkg] of spec.binaries) {
      current = `building ${name}`;
      const flags = [
        "build",
        "-trimpath",
        ...(spec.tags ? [`-tags=${spec.tags}`] : []),
        "-ldflags",
        spec.ldflags,
        "-o",
        join(tmp, "bin", name),
        pkg,
      ];
      await progress.step(current, () => run("go", flags, opts));
      files.push(`bin/${name}`);
    }
    if (spec.extras) {
      const extras = spec.extras;
      current = "copying manifests from the module cache";
      const moduleDir = async (mod: string) =>
        (await run("go", ["list", "-m", "-f", "{{.Dir}}", mod], opts)).stdout.trim();
      files.push(...(await progress.step(current, () => extras(tmp, moduleDir))));
    }
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    const e = err as { stderr?: string; message: string };
    throw new Error(
      `building ${spec.title} failed while ${current}: ${(e.stderr || e.message).trim().split("\n").slice(-20).join("\n")}`,
    );
  }
  const sizes: Record<string, number> = {};
  for (const rel of files) sizes[rel] = (await stat(join(tmp, rel))).size;
  const buildSeconds = Math.round((Date.now() - started) / 1000);
  const manifest: Manifest = { version: spec.name, go, builtAt: new Date().toISOString(), buildSeconds, files: sizes };
  await writeFile(join(tmp, "manifest.json"), JSON.stringify(manifest, null, 2));
  await rename(tmp, dir);
  log(`built ${spec.title} in ${formatDuration(buildSeconds * 1000)} into ${dir}`);
}

/**
 * The rollout conformance harness binary (test/support/rollout-conformance): the real Deployment
 * controller's sync pass, built from tools/rollout-conformance into the cache next to the
 * Kubernetes binaries. It uses the Kubernetes build's tags and module versions, so right after
 * that build it takes seconds (Go's build cache has the packages); alone and cold, about 4½
 * CPU-minutes.
 */
export async function ensureRolloutHarness(log: (line: string) => void = () => {}): Promise<string> {
  return join(await ensureGoBuild(ROLLOUT_HARNESS_BUILD, log), "bin", "rollout-conformance");
}
