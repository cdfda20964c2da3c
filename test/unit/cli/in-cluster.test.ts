// `--kubeconfig in-cluster`: what a pod provides is checked up front with one clear message,
// and the KubeConfig points at the service host with the mounted CA and a re-read token file.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { inClusterProblems, loadInClusterConfig, SERVICE_ACCOUNT_DIR } from "../../../src/cli/in-cluster.js";

describe("in-cluster config", () => {
  const root = mkdtempSync(join(tmpdir(), "krane-incluster-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const sa = join(root, SERVICE_ACCOUNT_DIR);

  it("lists every missing piece", () => {
    const problems = inClusterProblems({}, () => false);
    assert.equal(problems.length, 4);
    assert.match(problems[0] ?? "", /KUBERNETES_SERVICE_HOST is not set/);
    assert.match(problems[1] ?? "", /KUBERNETES_SERVICE_PORT is not set/);
    assert.match(problems[2] ?? "", /cannot read \/var\/run\/secrets\/kubernetes\.io\/serviceaccount\/token/);
    assert.match(problems[3] ?? "", /ca\.crt/);
  });

  it("refuses a port that is not a port", () => {
    for (const port of ["https", "0", "70000", "443 "]) {
      const problems = inClusterProblems(
        { KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBERNETES_SERVICE_PORT: port },
        () => true,
      );
      assert.deepEqual(problems, [`KUBERNETES_SERVICE_PORT must be a port number, got "${port}"`]);
    }
  });

  it("looks for the files under KRANE_IN_CLUSTER_ROOT", () => {
    const asked: string[] = [];
    inClusterProblems(
      { KUBERNETES_SERVICE_HOST: "h", KUBERNETES_SERVICE_PORT: "443", KRANE_IN_CLUSTER_ROOT: "/x" },
      (p) => (asked.push(p), true),
    );
    assert.deepEqual(asked, [`/x${SERVICE_ACCOUNT_DIR}/token`, `/x${SERVICE_ACCOUNT_DIR}/ca.crt`]);
  });

  it("fails with the list when something is missing", () => {
    assert.throws(
      () => loadInClusterConfig({ KRANE_IN_CLUSTER_ROOT: root }),
      (err: Error) => {
        assert.match(err.message, /^--kubeconfig in-cluster:\n {2}KUBERNETES_SERVICE_HOST is not set/);
        assert.match(err.message, new RegExp(`cannot read ${sa}/token`));
        return true;
      },
    );
  });

  it("builds a KubeConfig from the pod's files and variables", () => {
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, "token"), "t0ken");
    writeFileSync(join(sa, "ca.crt"), "-----BEGIN CERTIFICATE-----\n");
    writeFileSync(join(sa, "namespace"), "krane-system");
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    // client-node's loadFromCluster reads process.env itself.
    process.env.KUBERNETES_SERVICE_HOST = "fd00::1";
    process.env.KUBERNETES_SERVICE_PORT = "6443";
    try {
      const kc = loadInClusterConfig({ ...process.env, KRANE_IN_CLUSTER_ROOT: root });
      const cluster = kc.getCurrentCluster();
      assert.equal(cluster?.server, "https://[fd00::1]:6443");
      assert.equal(cluster?.caFile, join(sa, "ca.crt"));
      assert.equal(kc.getCurrentUser()?.authProvider?.config?.tokenFile, join(sa, "token"));
      assert.equal(kc.getContextObject(kc.getCurrentContext())?.namespace, "krane-system");
    } finally {
      for (const [k, v] of [
        ["KUBERNETES_SERVICE_HOST", saved.host],
        ["KUBERNETES_SERVICE_PORT", saved.port],
      ] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
