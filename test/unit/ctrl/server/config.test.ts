// Unit tests of `krane ctrl serve` settings: precedence (flag > env > file > default), parsing
// and the errors that name the bad setting.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseCtrlConfigFile, resolveCtrlSettings } from "../../../../src/ctrl/server/config.js";

describe("ctrl settings", () => {
  it("uses defaults when nothing is given", () => {
    const s = resolveCtrlSettings({}, {}, {});
    assert.equal(s.databaseUrl, "./.krane/ctrl.db");
    assert.deepEqual(s.listen, { host: "0.0.0.0", port: 7070 });
    assert.deepEqual(s.opsListen, { host: "0.0.0.0", port: 7071 });
    assert.equal(s.tls, undefined);
    assert.equal(s.outboxRetention, 100_000);
    assert.equal(s.poolSize, 10);
    assert.equal(s.adminTokenFile, ".krane/admin-token");
    assert.equal(s.streamKeepaliveMs, 10_000);
  });

  it("takes the stream keepalive in seconds, fractions allowed, within its bounds", () => {
    assert.equal(resolveCtrlSettings({ streamKeepalive: "0.5" }, {}, {}).streamKeepaliveMs, 500);
    assert.equal(resolveCtrlSettings({}, { KRANE_STREAM_KEEPALIVE_SECONDS: "30" }, {}).streamKeepaliveMs, 30_000);
    assert.equal(resolveCtrlSettings({}, {}, parseCtrlConfigFile("stream-keepalive: 2\n")).streamKeepaliveMs, 2_000);
    for (const bad of ["0", "0.05", "601", "soon", ""])
      assert.throws(() => resolveCtrlSettings({ streamKeepalive: bad }, {}, {}), /stream keepalive/, bad);
  });

  it("prefers flags to environment variables to the config file", () => {
    const file = parseCtrlConfigFile("pool-size: 3\noutboxRetention: 50\nlisten: 127.0.0.1:1\nlogLevel: debug\n");
    const env = { KRANE_POOL_SIZE: "4", KRANE_LISTEN: "127.0.0.1:2" };
    const s = resolveCtrlSettings({ poolSize: "5" }, env, file);
    assert.equal(s.poolSize, 5);
    assert.deepEqual(s.listen, { host: "127.0.0.1", port: 2 });
    assert.equal(s.outboxRetention, 50);
    assert.equal(s.logLevel, "debug");
    assert.equal(resolveCtrlSettings({}, env, file).poolSize, 4);
    assert.equal(resolveCtrlSettings({}, {}, file).poolSize, 3);
  });

  it("names the setting at fault", () => {
    assert.throws(() => resolveCtrlSettings({ poolSize: "0" }, {}, {}), /pool size/);
    assert.throws(() => resolveCtrlSettings({ poolSize: "2.5" }, {}, {}), /pool size/);
    assert.throws(() => resolveCtrlSettings({ outboxRetention: "-1" }, {}, {}), /outbox retention/);
    assert.throws(() => resolveCtrlSettings({ listen: "nope" }, {}, {}), /^Error: listen: expected host:port/);
    assert.throws(() => resolveCtrlSettings({ tlsCert: "c.pem" }, {}, {}), /TLS needs both/);
    assert.throws(() => parseCtrlConfigFile("poolsize: 3"), /unknown key "poolsize"/);
    assert.throws(() => parseCtrlConfigFile("- a\n- b"), /expected a mapping/);
  });

  it("turns the ops port off and puts the admin token next to a SQLite file", () => {
    const s = resolveCtrlSettings({ opsListen: "off", database: "/var/lib/krane/ctrl.db" }, {}, {});
    assert.equal(s.opsListen, null);
    assert.equal(s.adminTokenFile, "/var/lib/krane/admin-token");
    assert.equal(
      resolveCtrlSettings({ database: "postgres://db/krane" }, {}, {}).adminTokenFile,
      "./.krane/admin-token",
    );
  });

  it("takes the admin token from a flag, the environment or the config file, never with an explicit token file as well", () => {
    assert.equal(resolveCtrlSettings({ adminToken: "t" }, {}, {}).adminTokenSource, "flag");
    assert.equal(resolveCtrlSettings({}, { KRANE_ADMIN_TOKEN: "t" }, {}).adminTokenSource, "env");
    assert.equal(resolveCtrlSettings({}, {}, { adminToken: "t" }).adminTokenSource, "config");
    assert.equal(resolveCtrlSettings({}, {}, {}).adminTokenSource, undefined);
    assert.equal(
      resolveCtrlSettings({ adminTokenFile: "/run/secrets/admin" }, {}, {}).adminTokenFile,
      "/run/secrets/admin",
    );
    assert.throws(
      () => resolveCtrlSettings({ adminToken: "t" }, { KRANE_ADMIN_TOKEN_FILE: "/f" }, {}),
      /either --admin-token .* or --admin-token-file/,
    );
    assert.throws(() => resolveCtrlSettings({ adminToken: " " }, {}, {}), /admin token: empty/);
  });

  it("audit retention, the audit webhook and the pull-request webhook listener", () => {
    const d = resolveCtrlSettings({}, {}, {});
    assert.equal(d.audit.retentionMs, 400 * 86_400_000);
    assert.equal(d.audit.webhookUrl, undefined);
    assert.equal(d.previews.webhookListen, null, "no webhook listener unless asked");
    assert.equal(d.previews.replayWindowMs, 600_000);
    const s = resolveCtrlSettings(
      { auditRetention: "90d", webhookListen: "0.0.0.0:7072" },
      { KRANE_AUDIT_WEBHOOK_URL: "https://siem.example.com/krane", KRANE_AUDIT_WEBHOOK_SECRET: "k".repeat(20) },
      parseCtrlConfigFile("webhookReplayWindow: 5m\nauditWebhookSecretFile: /etc/krane/audit-key\n"),
    );
    assert.equal(s.audit.retentionMs, 90 * 86_400_000);
    assert.equal(s.audit.webhookUrl, "https://siem.example.com/krane");
    assert.deepEqual(s.audit.webhookSecret, { value: "k".repeat(20), file: "/etc/krane/audit-key" });
    assert.deepEqual(s.previews.webhookListen, { host: "0.0.0.0", port: 7072 });
    assert.equal(s.previews.replayWindowMs, 300_000);
    assert.throws(
      () => resolveCtrlSettings({ auditRetention: "forever" }, {}, {}),
      /audit retention: expected a duration/,
    );
    assert.throws(() => resolveCtrlSettings({ auditWebhookUrl: "ftp://x" }, {}, {}), /audit webhook url/);
    assert.throws(() => resolveCtrlSettings({ webhookListen: "nowhere" }, {}, {}), /webhook listen/);
  });

  it("reads the installation's default quotas from a flag, the environment or the file", () => {
    assert.equal(resolveCtrlSettings({}, {}, {}).defaultQuota.size, 0);
    assert.deepEqual(
      [...resolveCtrlSettings({ defaultQuota: "cpu=8,memory=16Gi,previews=unlimited" }, {}, {}).defaultQuota],
      [
        ["cpu", { kind: "limit", value: 8000 }],
        ["memory", { kind: "limit", value: 16384 }],
        ["previews", { kind: "unlimited" }],
      ],
    );
    assert.deepEqual(
      [...resolveCtrlSettings({}, { KRANE_DEFAULT_QUOTA: "instances=40" }, {}).defaultQuota],
      [["instances", { kind: "limit", value: 40 }]],
    );
    assert.throws(() => resolveCtrlSettings({ defaultQuota: "cpu=lots" }, {}, {}), /^Error: default quota: cpu: /);
  });

  it("builds from source: off without a build registry; the bases are required; the password only from the environment", () => {
    assert.equal(resolveCtrlSettings({}, {}, {}).builds, null);
    const s = resolveCtrlSettings(
      { database: "/var/lib/krane/ctrl.db", buildRegistry: "Registry.Example:5000", buildBases: "/srv/bases" },
      { KRANE_BUILD_REGISTRY_USERNAME: "ci", KRANE_BUILD_REGISTRY_PASSWORD: "pw", KRANE_BUILD_SLOTS: "3" },
      parseCtrlConfigFile("buildTimeout: 5m\n"),
    );
    assert.deepEqual(s.builds, {
      registry: "registry.example:5000",
      username: "ci",
      password: "pw",
      token: undefined,
      buildkitd: "buildkitd",
      buildctl: "buildctl",
      basesLayout: "/srv/bases",
      stateDir: "/var/lib/krane/builds",
      slots: 3,
      timeoutMs: 300_000,
      runIn: "ctrl",
    });
    // Builds in builder pods (pulled by agents): from a flag, the environment or the file; the
    // bases are then the agents' (ctrl needs none).
    assert.equal(
      resolveCtrlSettings({ buildRegistry: "r:5000", buildsIn: "cluster" }, {}, {}).builds?.runIn,
      "cluster",
    );
    assert.equal(
      resolveCtrlSettings({ buildRegistry: "r:5000" }, { KRANE_BUILDS_IN: "cluster" }, {}).builds?.runIn,
      "cluster",
    );
    assert.equal(
      resolveCtrlSettings({ buildRegistry: "r:5000" }, {}, parseCtrlConfigFile("buildsIn: cluster\n")).builds?.runIn,
      "cluster",
    );
    // The build registry's CA stays when deploys do not resolve digests (it was lost with them).
    assert.equal(
      resolveCtrlSettings(
        { buildRegistry: "r:5000", buildBases: "/b", imageDigests: "off", registryCaFile: "/etc/registry-ca.pem" },
        {},
        {},
      ).builds?.registryCaFile,
      "/etc/registry-ca.pem",
    );
    assert.throws(
      () => resolveCtrlSettings({ buildRegistry: "r:5000", buildsIn: "agent" }, {}, {}),
      /builds in: "agent" is not where builds run \(ctrl or cluster\)/,
    );
    // Repositories' own CA (a git server behind a private CA): flag, variable or file, like the rest.
    const ca = { database: "/var/lib/krane/ctrl.db", buildRegistry: "r:5000", buildBases: "/b" };
    assert.equal(
      resolveCtrlSettings({ ...ca, gitCaFile: "/etc/git-ca.pem" }, {}, {}).builds?.gitCaFile,
      "/etc/git-ca.pem",
    );
    assert.equal(resolveCtrlSettings(ca, { KRANE_GIT_CA_FILE: "/env/ca.pem" }, {}).builds?.gitCaFile, "/env/ca.pem");
    assert.equal(
      resolveCtrlSettings(ca, {}, parseCtrlConfigFile("gitCaFile: /f/ca.pem\n")).builds?.gitCaFile,
      "/f/ca.pem",
    );
    assert.throws(() => resolveCtrlSettings({ buildRegistry: "registry.example" }, {}, {}), /build bases: /);
    assert.throws(
      () => resolveCtrlSettings({ buildRegistry: "https://x/y", buildBases: "/b" }, {}, {}),
      /build registry: "https:\/\/x\/y" is not a registry host/,
    );
    assert.throws(
      () => resolveCtrlSettings({ buildRegistry: "r:5000", buildBases: "/b", buildSlots: "0" }, {}, {}),
      /build slots/,
    );
  });

  it("builds' token mode: the key file and the service; no Basic user beside it; a service name checked", () => {
    const base = { buildRegistry: "r:5000", buildBases: "/b" };
    assert.deepEqual(
      resolveCtrlSettings(base, { KRANE_BUILD_REGISTRY_TOKEN_KEY_FILE: "/etc/krane/token.pem" }, {}).builds?.token,
      { keyFile: "/etc/krane/token.pem", service: "krane-build-registry" },
    );
    assert.deepEqual(
      resolveCtrlSettings({ ...base, buildRegistryTokenKeyFile: "/k.pem", buildRegistryService: "reg.example" }, {}, {})
        .builds?.token,
      { keyFile: "/k.pem", service: "reg.example" },
    );
    assert.equal(resolveCtrlSettings(base, {}, {}).builds?.token, undefined, "Basic mode unless a key is given");
    assert.throws(
      () => resolveCtrlSettings({ ...base, buildRegistryTokenKeyFile: "/k.pem", buildRegistryUsername: "ci" }, {}, {}),
      /build registry token key: .*leave out --build-registry-username/,
    );
    assert.throws(
      () => resolveCtrlSettings({ ...base, buildRegistryService: "a b" }, {}, {}),
      /build registry service: "a b" is not a service name/,
    );
  });

  it("reads the OpenID provider's settings, refusing what cannot work", () => {
    assert.equal(resolveCtrlSettings({}, {}, {}).oidc, undefined, "no provider unless asked");
    const s = resolveCtrlSettings(
      { oidcIssuer: "https://id.example.com/realms/eng", oidcGroupRoles: "eng=developer,ops=acme:admin" },
      { KRANE_OIDC_CLIENT_ID: "krane", KRANE_OIDC_CLIENT_SECRET: "s3cret" },
      parseCtrlConfigFile("oidcClientSecretFile: /etc/krane/oidc-secret\n"),
    );
    assert.deepEqual(s.oidc, {
      issuer: "https://id.example.com/realms/eng",
      clientId: "krane",
      clientSecret: { value: "s3cret", file: "/etc/krane/oidc-secret" },
      groupRoles: [
        { group: "eng", role: "developer" },
        { group: "ops", workspace: "acme", role: "admin" },
      ],
    });
    assert.equal(
      resolveCtrlSettings({ oidcIssuer: "http://127.0.0.1:9000", oidcClientId: "k" }, {}, {}).oidc?.issuer,
      "http://127.0.0.1:9000",
    );
    assert.throws(
      () => resolveCtrlSettings({ oidcIssuer: "http://id.example.com", oidcClientId: "k" }, {}, {}),
      /oidc issuer: must be https/,
    );
    assert.throws(() => resolveCtrlSettings({ oidcIssuer: "https://id.example.com" }, {}, {}), /oidc client id/);
    assert.throws(() => resolveCtrlSettings({ oidcClientId: "k" }, {}, {}), /need --oidc-issuer/);
    assert.throws(
      () =>
        resolveCtrlSettings(
          { oidcIssuer: "https://id.example.com", oidcClientId: "k", oidcGroupRoles: "eng=root" },
          {},
          {},
        ),
      /--oidc-group-role: "eng=root"/,
    );
  });

  it("reads the public URL as an origin, refusing anything more or other", () => {
    assert.equal(resolveCtrlSettings({}, {}, {}).publicUrl, undefined, "each request's own origin unless set");
    assert.equal(
      resolveCtrlSettings({ publicUrl: "https://Krane.Example.com/" }, {}, {}).publicUrl,
      "https://krane.example.com",
    );
    assert.equal(
      resolveCtrlSettings({}, { KRANE_PUBLIC_URL: "https://krane.example.com:8443" }, {}).publicUrl,
      "https://krane.example.com:8443",
    );
    assert.equal(
      resolveCtrlSettings({}, {}, parseCtrlConfigFile("publicUrl: http://10.0.0.5:7070\n")).publicUrl,
      "http://10.0.0.5:7070",
    );
    for (const bad of [
      "krane.example.com",
      "ftp://krane.example.com",
      "https://krane.example.com/krane",
      "https://krane.example.com/?a=b",
      "https://user:pw@krane.example.com",
    ])
      assert.throws(() => resolveCtrlSettings({ publicUrl: bad }, {}, {}), /^Error: public url: /, bad);
  });
});
