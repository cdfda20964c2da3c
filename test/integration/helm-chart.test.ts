// The Helm chart against a real API server: helm lint; helm template (default, PostgreSQL and
// agent-only values) applied with server-side dry-run, so every object is valid; a typo in the
// values fails with a message naming it; helm install creates the objects (the agent's fence
// included, and enforced), and the agent's ServiceAccount can do exactly what
// deploy/rbac/agent.yaml grants and nothing more. The install on real nodes, with pods that run:
// helm-install.test.ts.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { ensureHelm, ensureKubeAssets } from "../../src/cluster/index.js";
import { installFence } from "../../src/cluster/fence.js";
import { eventually, useCluster } from "../support/cluster.js";

const run = promisify(execFile);
const root = new URL("../../", import.meta.url).pathname;
const chart = join(root, "deploy/helm/krane");
const NS = "krane-system";
const AGENT = `system:serviceaccount:${NS}:krane-agent`;

// The chart installs the agent's fence itself here; the last test adds the fence as `krane
// cluster up` does, and installs the chart beside it.
const h = useCluster({ fence: false });
let helm = "";
let kubectl = "";
const dir = mkdtempSync(join(tmpdir(), "krane-helm-"));
after(() => rmSync(dir, { recursive: true, force: true }));

before(
  async () => {
    await h.ready();
    helm = (await ensureHelm()).bin;
    kubectl = (await ensureKubeAssets()).bin.kubectl;
  },
  { timeout: 15 * 60_000 },
);

interface Out {
  code: number;
  stdout: string;
  stderr: string;
}

async function exec(bin: string, args: string[], input?: string): Promise<Out> {
  const env = {
    ...process.env,
    KUBECONFIG: h.cluster.kubeconfigPath,
    HELM_CACHE_HOME: join(dir, "cache"),
    HELM_CONFIG_HOME: join(dir, "config"),
    HELM_DATA_HOME: join(dir, "data"),
  };
  const p = run(bin, args, { env, maxBuffer: 32 * 1024 * 1024 });
  if (input !== undefined) {
    p.child.stdin?.end(input);
  }
  try {
    const { stdout, stderr } = await p;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : 1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

async function ok(bin: string, args: string[], input?: string): Promise<string> {
  const r = await exec(bin, args, input);
  assert.equal(r.code, 0, `${bin.split("/").pop()} ${args.join(" ")}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

interface KubeDoc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: unknown;
}

function docs(text: string): KubeDoc[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as KubeDoc | null)
    .filter((d): d is KubeDoc => d !== null && typeof d === "object" && typeof d.kind === "string");
}

const valueSets: Record<string, string[]> = {
  default: [],
  postgres: ["-f", join(chart, "ci/postgres-values.yaml")],
  "agent-only": ["-f", join(chart, "ci/agent-only-values.yaml")],
};

describe("helm chart", () => {
  it("passes helm lint --strict with each value set", async () => {
    for (const [name, values] of Object.entries(valueSets)) {
      const out = await ok(helm, ["lint", "--strict", chart, "--namespace", NS, ...values]);
      assert.match(out, /1 chart\(s\) linted, 0 chart\(s\) failed/, name);
    }
  });

  it("renders objects the API server accepts (server-side dry run)", async () => {
    for (const [name, values] of Object.entries(valueSets)) {
      const rendered = await ok(helm, ["template", "krane", chart, "--namespace", NS, ...values]);
      const objects = docs(rendered);
      assert.ok(objects.length >= 4, `${name}: ${objects.length} objects`);
      // Namespaced objects of a dry run need their namespaces for real.
      // Namespaced objects of a dry run need their namespaces for real; the chart's own ones
      // are removed again so that the install below starts from a clean cluster.
      const created = objects.filter((o) => o.kind === "Namespace").map((o) => o.metadata.name);
      for (const ns of [NS, ...created])
        await ok(
          kubectl,
          ["apply", "-f", "-"],
          JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } }),
        );
      const out = await ok(kubectl, ["apply", "--dry-run=server", "-f", "-"], rendered);
      for (const o of objects)
        assert.match(
          out,
          new RegExp(`${o.metadata.name} (created|configured|unchanged) \\(server dry run\\)`),
          `${name}: ${o.kind} ${o.metadata.name}`,
        );
      for (const ns of created) await ok(kubectl, ["delete", "namespace", ns, "--wait=true", "--timeout=60s"]);
    }
  });

  it("refuses a misspelt or invalid value, naming it", async () => {
    const agentOn = ["--set", "agent.enabled=true", "--set", "agent.region=eu", "--set", "agent.token.value=t"];
    const cases: [string[], RegExp][] = [
      [["--set", "ctrl.replicaz=2"], /at '\/ctrl': additional properties 'replicaz' not allowed/],
      [["--set", "agnet.enabled=true"], /additional properties 'agnet' not allowed/],
      [["--set", "ctrl.replicas=2"], /at '\/ctrl\/replicas': maximum: got 2, want 1/],
      [["--set", "ctrl.database.type=mysql"], /at '\/ctrl\/database\/type'/],
      [["--set", "agent.enabled=true"], /at '\/agent\/region': minLength: got 0, want 1/],
      [["--set", "agent.replicas=9"], /at '\/agent\/replicas': maximum: got 9, want 5/],
      [
        [
          "--set",
          "agent.enabled=true",
          "--set",
          "agent.region=eu",
          "--set",
          "agent.token.value=t",
          "--set",
          "agent.leaderElection.enabled=false",
        ],
        /agent.replicas > 1 needs agent.leaderElection.enabled/,
      ],
      [["--set", "ctrl.database.type=postgres"], /at '\/ctrl\/database\/postgres\/url': minLength: got 0, want 1/],
      [
        [...agentOn, "--set", "agent.heapLimitMiB=1024"],
        /agent\.heapLimitMiB: 1024 MiB is not below agent\.resources\.limits\.memory \(1Gi = 1024 MiB\)/,
      ],
      [
        [...agentOn, "--set", "agent.resources.limits.memory=256Mi", "--set", "agent.heapLimitMiB=300"],
        /agent\.heapLimitMiB: 300 MiB is not below agent\.resources\.limits\.memory \(256Mi = 256 MiB\)/,
      ],
      [
        [...agentOn, "--set", "agent.resources.limits=null"],
        /agent\.resources\.limits\.memory: the agent needs a memory limit/,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await exec(helm, ["template", "krane", chart, "--namespace", NS, ...args]);
      assert.notEqual(r.code, 0, args.join(" "));
      assert.match(r.stderr, message, args.join(" "));
    }
    const wrongNs = await exec(helm, [
      "template",
      "krane",
      chart,
      "--namespace",
      "default",
      "-f",
      join(chart, "ci/postgres-values.yaml"),
    ]);
    assert.match(wrongNs.stderr, /the agent runs in namespace krane-system/);
  });

  it("renders the agent's and the sentinel's RBAC and the agent's fence exactly as deploy/rbac/ has them", async () => {
    const file = ["agent.yaml", "sentinel.yaml", "fence.yaml"]
      .flatMap((f) => docs(readFileSync(join(root, "deploy/rbac", f), "utf8")))
      .filter((o) => !(o.kind === "Namespace" && o.metadata.name === NS))
      // The sentinel namespace is in both agent.yaml and sentinel.yaml; the chart renders it once.
      .filter((o, i, all) => all.findIndex((x) => x.kind === o.kind && x.metadata.name === o.metadata.name) === i);
    const rendered = docs(
      await ok(helm, ["template", "krane", chart, "--namespace", NS, "-f", join(chart, "ci/postgres-values.yaml")]),
    );
    const key = (o: KubeDoc): string => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
    const strip = (o: KubeDoc): unknown => {
      const { metadata, ...rest } = o;
      return { ...rest, metadata: { name: metadata.name, namespace: metadata.namespace } };
    };
    for (const want of file) {
      const got = rendered.find((o) => key(o) === key(want));
      assert.ok(got, `the chart renders ${key(want)}`);
      assert.deepEqual(strip(got), strip(want), key(want));
      assert.equal(got.metadata.labels?.["app.kubernetes.io/managed-by"], "krane", `${key(want)} keeps krane's label`);
    }
    const rbacKinds = new Set(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]);
    const extra = rendered.filter((o) => rbacKinds.has(o.kind) && !file.some((w) => key(w) === key(o)));
    assert.deepEqual(extra.map(key), [], "no RBAC beyond agent.yaml and sentinel.yaml");
    const off = docs(
      await ok(helm, [
        "template",
        "krane",
        chart,
        "--namespace",
        NS,
        "-f",
        join(chart, "ci/postgres-values.yaml"),
        "--set",
        "agent.fence.enabled=false",
      ]),
    );
    assert.deepEqual(
      off.filter((o) => o.kind.startsWith("ValidatingAdmissionPolicy")).map(key),
      [],
      "agent.fence.enabled=false renders no fence",
    );
  });

  it("installs into the cluster, and the agent's ServiceAccount may do what agent.yaml grants and no more", async () => {
    await ok(helm, [
      "install",
      "krane",
      chart,
      "--namespace",
      NS,
      "--create-namespace",
      "--set",
      "agent.enabled=true",
      "--set",
      "agent.region=local",
      "--set",
      "agent.token.value=krane_cluster_test",
    ]);
    const objects = [
      ["deployment", NS, "krane-ctrl"],
      ["deployment", NS, "krane-agent"],
      ["service", NS, "krane-ctrl"],
      ["poddisruptionbudget", NS, "krane-ctrl"],
      ["persistentvolumeclaim", NS, "krane-ctrl-data"],
      ["secret", NS, "krane-ctrl"],
      ["secret", NS, "krane-agent"],
      ["serviceaccount", NS, "krane-agent"],
      ["clusterrole", "", "krane-agent"],
      ["clusterrolebinding", "", "krane-agent"],
      ["namespace", "", "sentinel"],
      ["role", "sentinel", "krane-agent-sentinel"],
      ["rolebinding", "sentinel", "krane-agent-sentinel"],
      ["serviceaccount", "sentinel", "krane-sentinel"],
      ["role", "sentinel", "krane-sentinel"],
      ["rolebinding", "sentinel", "krane-sentinel"],
      ["validatingadmissionpolicy", "", "krane-agent-fence"],
      ["validatingadmissionpolicybinding", "", "krane-agent-fence"],
    ];
    for (const [kind = "", ns = "", name = ""] of objects)
      await ok(kubectl, ["get", kind, name, ...(ns ? ["-n", ns] : [])]);
    // The fence is enforced: the agent with unrestricted RBAC may not write outside krane's objects.
    await eventually(
      "the chart's fence enforced",
      async () => {
        const r = await exec(kubectl, [
          "create",
          "configmap",
          "fence-probe",
          "-n",
          "default",
          "--dry-run=server",
          `--as=${AGENT}`,
          "--as-group=system:masters",
        ]);
        return r.code !== 0 && /krane-agent-fence/.test(r.stderr) ? true : undefined;
      },
      30_000,
    );
    // The release owns the fence it installed, and keeps it across upgrades (a fence it finds on
    // the cluster and did not install is left alone: the last test).
    await ok(helm, ["upgrade", "krane", chart, "--namespace", NS, "--reuse-values", "--set", "agent.logLevel=debug"]);
    assert.match(
      await ok(helm, ["get", "manifest", "krane", "--namespace", NS]),
      /kind: ValidatingAdmissionPolicyBinding/,
    );
    for (const kind of ["validatingadmissionpolicy", "validatingadmissionpolicybinding"]) {
      const live = JSON.parse(await ok(kubectl, ["get", kind, "krane-agent-fence", "-o", "json"])) as {
        metadata: { annotations?: Record<string, string> };
      };
      assert.equal(live.metadata.annotations?.["meta.helm.sh/release-name"], "krane", kind);
    }
    // The generated admin token is a krane user token.
    const secret = JSON.parse(await ok(kubectl, ["get", "secret", "krane-ctrl", "-n", NS, "-o", "json"])) as {
      data: Record<string, string>;
    };
    assert.match(Buffer.from(secret.data["admin-token"] ?? "", "base64").toString(), /^krane_user_[A-Za-z0-9]{43}$/);

    // What the agent may do beyond what any ServiceAccount may (a bare one is the baseline).
    await ok(kubectl, ["create", "serviceaccount", "nobody", "-n", NS]);
    await ok(kubectl, ["create", "namespace", "ws-acme"]);
    const rules = docs(readFileSync(join(root, "deploy/rbac/agent.yaml"), "utf8"));
    const clusterRole = rules.find((o) => o.kind === "ClusterRole") as unknown as { rules: Rule[] };
    const sentinelRole = rules.find((o) => o.kind === "Role") as unknown as { rules: Rule[] };
    for (const [ns, granted] of [
      ["ws-acme", clusterRole.rules],
      ["sentinel", [...clusterRole.rules, ...sentinelRole.rules]],
    ] as const) {
      const agent = parseCanI(await ok(kubectl, ["auth", "can-i", "--list", "-n", ns, `--as=${AGENT}`]));
      const baseline = parseCanI(
        await ok(kubectl, ["auth", "can-i", "--list", "-n", ns, `--as=system:serviceaccount:${NS}:nobody`]),
      );
      const beyond = [...agent].filter((p) => !baseline.has(p)).sort();
      assert.deepEqual(
        beyond,
        [...expand(granted)].filter((p) => !baseline.has(p)).sort(),
        `permissions in namespace ${ns}`,
      );
    }
    // Spot checks through the authorizer itself.
    const can = async (args: string[]): Promise<boolean> =>
      (await exec(kubectl, ["auth", "can-i", ...args, `--as=${AGENT}`])).stdout.trim() === "yes";
    assert.equal(await can(["patch", "replicasets", "-n", "ws-acme"]), true);
    assert.equal(await can(["get", "secrets", "-n", "ws-acme"]), false);
    assert.equal(await can(["create", "pods/exec", "-n", "ws-acme"]), false);
    assert.equal(await can(["patch", "deployments", "-n", "ws-acme"]), false);
    assert.equal(await can(["patch", "deployments", "-n", "sentinel"]), true);
    assert.equal(await can(["delete", "namespaces"]), false);
    assert.equal(await can(["create", "clusterrolebindings"]), false);
  });

  it("uninstalls and leaves the database claim, the sentinel namespace and the sentinels' RBAC", async () => {
    await ok(helm, ["uninstall", "krane", "--namespace", NS]);
    assert.notEqual((await exec(kubectl, ["get", "deployment", "krane-ctrl", "-n", NS])).code, 0);
    assert.notEqual((await exec(kubectl, ["get", "clusterrole", "krane-agent"])).code, 0);
    assert.notEqual((await exec(kubectl, ["get", "validatingadmissionpolicy", "krane-agent-fence"])).code, 0);
    assert.notEqual((await exec(kubectl, ["get", "role", "krane-agent-sentinel", "-n", "sentinel"])).code, 0);
    await ok(kubectl, ["get", "persistentvolumeclaim", "krane-ctrl-data", "-n", NS]);
    await ok(kubectl, ["get", "namespace", "sentinel"]);
    for (const kind of ["serviceaccount", "role", "rolebinding"])
      await ok(kubectl, ["get", kind, "krane-sentinel", "-n", "sentinel"]);
  });

  it("follows the README on a cluster whose fence `krane cluster up` installed: keeps that fence as it is, and leaves it on uninstall", async () => {
    await installFence(h.cluster.endpoint());
    const fence = async (): Promise<KubeDoc[]> =>
      (
        JSON.parse(
          await ok(kubectl, [
            "get",
            "validatingadmissionpolicy,validatingadmissionpolicybinding",
            "krane-agent-fence",
            "-o",
            "json",
          ]),
        ) as { items: KubeDoc[] }
      ).items;
    const before = await fence();
    assert.equal(before.length, 2);
    // The README's two steps: ctrl first, then the agent with --reuse-values.
    await ok(helm, ["install", "krane", chart, "--namespace", NS, "--create-namespace"]);
    const notes = await ok(helm, [
      "upgrade",
      "krane",
      chart,
      "--namespace",
      NS,
      "--reuse-values",
      "--set",
      "agent.enabled=true",
      "--set",
      "agent.region=local",
      "--set",
      "agent.token.value=krane_cluster_test",
    ]);
    assert.match(notes, /krane-agent-fence, was on the cluster before this release/);
    // The notes lead to krane's own sentinel (no image named), not to krane's image as a user's one.
    assert.match(notes, /create them without --sentinel-image/);
    assert.doesNotMatch(notes, /--sentinel-image[^\n]*krane:0\.1\.0/);
    await ok(kubectl, ["get", "deployment", "krane-agent", "-n", NS]);
    // The release does not own the fence: the objects are exactly as `cluster up` made them.
    const manifest = await ok(helm, ["get", "manifest", "krane", "--namespace", NS]);
    assert.doesNotMatch(manifest, /kind: ValidatingAdmissionPolicy/);
    assert.deepEqual(await fence(), before);
    // A second upgrade (the README's way to change a value) keeps it so.
    await ok(helm, ["upgrade", "krane", chart, "--namespace", NS, "--reuse-values", "--set", "agent.logLevel=debug"]);
    assert.deepEqual(await fence(), before);
    await ok(helm, ["uninstall", "krane", "--namespace", NS]);
    assert.notEqual((await exec(kubectl, ["get", "deployment", "krane-agent", "-n", NS])).code, 0);
    assert.deepEqual(await fence(), before, "helm uninstall leaves the fence it did not install");
  });
});

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/** "resource.group verb" pairs a rule list grants. */
function expand(rules: readonly Rule[]): Set<string> {
  const out = new Set<string>();
  for (const r of rules)
    for (const g of r.apiGroups)
      for (const res of r.resources) for (const v of r.verbs) out.add(`${g ? `${res}.${g}` : res} ${v}`);
  return out;
}

/** `kubectl auth can-i --list` as "resource verb" pairs (non-resource URLs as "url verb"). */
function parseCanI(text: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split("\n").slice(1)) {
    if (!line.trim()) continue;
    const cols = line.trim().split(/\s{2,}/);
    const verbs = (cols[cols.length - 1] ?? "")
      .replace(/^\[|\]$/g, "")
      .split(/\s+/)
      .filter(Boolean);
    const resource = cols[0]?.startsWith("[") ? "" : cols[0];
    const url = cols.find((c) => c.startsWith("[/")) ?? "";
    const names = cols.length >= 4 ? cols[cols.length - 2] : "";
    for (const v of verbs) out.add(`${resource || url}${names && names !== "[]" ? ` (${names})` : ""} ${v}`);
  }
  return out;
}
