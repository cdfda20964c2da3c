import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { KubeAccess, KubeConfigError } from "../../../src/kube/kubeconfig.js";

function dir(): { path: string; done(): void } {
  const path = mkdtempSync(join(tmpdir(), "krane-kubeconfig-"));
  return { path, done: () => rmSync(path, { recursive: true, force: true }) };
}

async function options(a: KubeAccess): Promise<https.RequestOptions> {
  const o: https.RequestOptions = {};
  await a.applyToHTTPSOptions(o);
  return o;
}

function doc(users: Record<string, unknown>[], extra: Record<string, unknown> = {}): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    "current-context": "main",
    contexts: [
      { name: "main", context: { cluster: "c1", user: "u1" } },
      { name: "other", context: { cluster: "c2", user: "u2" } },
    ],
    clusters: [
      {
        name: "c1",
        cluster: {
          server: "https://10.0.0.1:6443",
          "certificate-authority-data": Buffer.from("CA1").toString("base64"),
        },
      },
      {
        name: "c2",
        cluster: {
          server: "https://10.0.0.2:6443",
          "certificate-authority": "ca2.pem",
          "insecure-skip-tls-verify": true,
          "tls-server-name": "api.internal",
        },
      },
    ],
    users,
    ...extra,
  });
}

test("a token user: the current context's server, CA and bearer token", async () => {
  const d = dir();
  try {
    writeFileSync(
      join(d.path, "config"),
      doc([
        { name: "u1", user: { token: "t-1" } },
        { name: "u2", user: {} },
      ]),
    );
    const a = KubeAccess.fromFile(join(d.path, "config"));
    assert.equal(a.getCurrentCluster().server, "https://10.0.0.1:6443");
    const o = await options(a);
    assert.equal(String(o.ca), "CA1");
    assert.equal((o.headers as Record<string, string>).authorization, "Bearer t-1");
  } finally {
    d.done();
  }
});

test("files are relative to the kubeconfig; a token file is re-read (rotation); client certificates", async () => {
  const d = dir();
  try {
    writeFileSync(join(d.path, "ca2.pem"), "CA2");
    writeFileSync(join(d.path, "tok"), "first\n");
    writeFileSync(join(d.path, "crt"), "CERT");
    writeFileSync(join(d.path, "key"), "KEY");
    writeFileSync(
      join(d.path, "config"),
      doc([
        { name: "u1", user: {} },
        { name: "u2", user: { tokenFile: "tok", "client-certificate": "crt", "client-key": "key" } },
      ]),
    );
    const a = KubeAccess.fromFile(join(d.path, "config"), "other");
    assert.equal(a.getCurrentCluster().server, "https://10.0.0.2:6443");
    const o = await options(a);
    assert.equal(String(o.ca), "CA2");
    assert.equal(o.rejectUnauthorized, false);
    assert.equal(o.servername, "api.internal");
    assert.equal(String(o.cert), "CERT");
    assert.equal(String(o.key), "KEY");
    assert.equal((o.headers as Record<string, string>).authorization, "Bearer first");
    writeFileSync(join(d.path, "tok"), "second\n");
    assert.equal(((await options(a)).headers as Record<string, string>).authorization, "Bearer second");
  } finally {
    d.done();
  }
});

test("several files: the first to name an entry wins, current-context from the first that sets it", () => {
  const d = dir();
  try {
    writeFileSync(join(d.path, "a"), stringify({ clusters: [{ name: "c1", cluster: { server: "https://first:1" } }] }));
    writeFileSync(join(d.path, "b"), doc([{ name: "u1", user: { token: "x" } }]));
    assert.equal(
      KubeAccess.fromFiles([join(d.path, "a"), join(d.path, "b")]).getCurrentCluster().server,
      "https://first:1",
    );
  } finally {
    d.done();
  }
});

test("broken kubeconfigs name what is missing", () => {
  const d = dir();
  try {
    const write = (v: unknown): string => {
      writeFileSync(join(d.path, "k"), typeof v === "string" ? v : stringify(v));
      return join(d.path, "k");
    };
    assert.throws(() => KubeAccess.fromFile(write("{")), KubeConfigError);
    assert.throws(() => KubeAccess.fromFile(write({ contexts: [] })), /no current-context/);
    assert.throws(() => KubeAccess.fromFile(write({ "current-context": "x" })), /context "x" not found/);
    assert.throws(
      () =>
        KubeAccess.fromFile(write({ "current-context": "x", contexts: [{ name: "x", context: { cluster: "nope" } }] })),
      /cluster "nope"/,
    );
  } finally {
    d.done();
  }
});

test("in-cluster: the service-account files and KUBERNETES_SERVICE_HOST/PORT, as a pod has them", async () => {
  const d = dir();
  try {
    writeFileSync(join(d.path, "token"), "sa-token");
    writeFileSync(join(d.path, "ca.crt"), "SACA");
    const a = KubeAccess.inCluster(d.path, { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" });
    assert.equal(a.getCurrentCluster().server, "https://[fd00::1]:443");
    const o = await options(a);
    assert.equal(String(o.ca), "SACA");
    assert.equal((o.headers as Record<string, string>).authorization, "Bearer sa-token");
    assert.throws(() => KubeAccess.inCluster(d.path, {}), /KUBERNETES_SERVICE_HOST/);
  } finally {
    d.done();
  }
});

test("an exec credential plugin is run through client-node, as kubectl would", async () => {
  const d = dir();
  try {
    const plugin = join(d.path, "plugin.sh");
    writeFileSync(
      plugin,
      `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin"}}'\n`,
    );
    chmodSync(plugin, 0o755);
    writeFileSync(
      join(d.path, "config"),
      doc([
        {
          name: "u1",
          user: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: plugin, interactiveMode: "Never" } },
        },
        { name: "u2", user: {} },
      ]),
    );
    const o = await options(KubeAccess.fromFile(join(d.path, "config")));
    assert.equal(
      (o.headers as Record<string, string>).Authorization ?? (o.headers as Record<string, string>).authorization,
      "Bearer from-plugin",
    );
  } finally {
    d.done();
  }
});
