import { test } from "node:test";
import assert from "node:assert/strict";
import {
  builderSettingsOf,
  gatewaySettingsOf,
  parseConfigFile,
  resolveAgentSettings,
} from "../../../src/agent/config.js";

test("flags beat env, env beats the config file, the file beats defaults", () => {
  const file = parseConfigFile("ctrl-url: http://file:7070\ntoken: file-token\nregion: file-region\nconcurrency: 4\n");
  const { settings } = resolveAgentSettings(
    { region: "flag-region" },
    { KRANE_CTRL_TOKEN: "env-token", KRANE_KUBE_QPS: "50" },
    file,
  );
  assert.ok(settings);
  assert.equal(settings.region, "flag-region");
  assert.equal(settings.token, "env-token");
  assert.equal(settings.ctrlUrl, "http://file:7070");
  assert.equal(settings.concurrency, 4);
  assert.equal(settings.kubeQps, 50);
  assert.equal(settings.resyncPeriodSeconds, 60);
  assert.equal(settings.opsPort, 8071);
});

test("missing or bad settings are listed together", () => {
  const { settings, problems } = resolveAgentSettings({ concurrency: "0", ctrlUrl: "ftp://x" }, {}, {});
  assert.equal(settings, undefined);
  assert.ok(problems.some((p) => p.startsWith("token is required")));
  assert.ok(problems.some((p) => p.startsWith("region is required")));
  assert.ok(problems.some((p) => p.startsWith("concurrency must be")));
  assert.ok(problems.some((p) => p.startsWith("ctrlUrl must start")));
});

test("unknown config file keys are refused", () => {
  assert.throws(() => parseConfigFile("regoin: x\n"), /unknown key "regoin"/);
});

test("the ctrl timeout is in seconds, fractions allowed, within its bounds", () => {
  const base = { ctrlUrl: "http://ctrl:7070", token: "t", region: "eu" };
  assert.equal(resolveAgentSettings(base, {}, {}).settings?.ctrlTimeoutSeconds, 5);
  assert.equal(resolveAgentSettings({ ...base, ctrlTimeoutSeconds: "0.5" }, {}, {}).settings?.ctrlTimeoutSeconds, 0.5);
  assert.equal(resolveAgentSettings(base, { KRANE_CTRL_TIMEOUT_SECONDS: "2" }, {}).settings?.ctrlTimeoutSeconds, 2);
  for (const bad of ["0", "301", "fast"]) {
    const { settings, problems } = resolveAgentSettings({ ...base, ctrlTimeoutSeconds: bad }, {}, {});
    assert.equal(settings, undefined, bad);
    assert.ok(problems.some((p) => p.startsWith("ctrlTimeoutSeconds must be")));
  }
});

test("HTTPS listeners need a GatewayClass name, an issuer and a public Gateway; the port defaults to 443", () => {
  const base = { ctrlUrl: "http://ctrl:7070", token: "t", region: "eu", publicGateway: "platform/external" };
  const ok = resolveAgentSettings(
    { ...base, certificateIssuer: "ClusterIssuer/ca", httpsGatewayClass: "edge" },
    {},
    {},
  ).settings;
  assert.ok(ok);
  assert.deepEqual(gatewaySettingsOf(ok)?.https, { className: "edge", port: 443 });
  const port = resolveAgentSettings(
    { ...base, certificateIssuer: "ClusterIssuer/ca", httpsGatewayClass: "edge" },
    { KRANE_HTTPS_PORT: "8443" },
    {},
  ).settings;
  assert.equal(port && gatewaySettingsOf(port)?.https?.port, 8443);
  const noIssuer = resolveAgentSettings({ ...base, httpsGatewayClass: "edge" }, {}, {});
  assert.equal(noIssuer.settings, undefined);
  assert.ok(noIssuer.problems.some((p) => p.startsWith("httpsGatewayClass needs certificateIssuer")));
  const bad = resolveAgentSettings(
    { ...base, certificateIssuer: "ClusterIssuer/ca", httpsGatewayClass: "Edge Class", httpsPort: "0" },
    {},
    {},
  );
  assert.ok(bad.problems.some((p) => p.startsWith("httpsGatewayClass must be")));
  assert.ok(bad.problems.some((p) => p.startsWith("httpsPort must be")));
  const none = resolveAgentSettings({ ...base, certificateIssuer: "ClusterIssuer/ca" }, {}, {}).settings;
  assert.equal(none && gatewaySettingsOf(none)?.https, undefined, "no class: no HTTPS listeners");
});

test("the startup CPU boost is in millicores, 1000 by default, 0 turns it off", () => {
  const base = { ctrlUrl: "http://ctrl:7070", token: "t", region: "eu" };
  assert.equal(resolveAgentSettings(base, {}, {}).settings?.startupCpuBoostMillicores, 1000);
  assert.equal(
    resolveAgentSettings(base, { KRANE_STARTUP_CPU_BOOST_MILLICORES: "0" }, {}).settings?.startupCpuBoostMillicores,
    0,
  );
  for (const bad of ["-1", "1.5", "lots"]) {
    const { settings, problems } = resolveAgentSettings({ ...base, startupCpuBoostMillicores: bad }, {}, {});
    assert.equal(settings, undefined, bad);
    assert.ok(problems.some((p) => p.startsWith("startupCpuBoostMillicores must be")));
  }
});

test("builds from source run only with --builds N, and need the base images' layout", () => {
  const base = { ctrlUrl: "http://ctrl:7070", token: "t", region: "eu" };
  const off = resolveAgentSettings(base, {}, {}).settings;
  assert.ok(off);
  assert.equal(builderSettingsOf(off), undefined, "no build kind by default");
  const on = resolveAgentSettings({ ...base, builds: "2" }, { KRANE_BUILD_BASES: "/srv/bases" }, {}).settings;
  assert.ok(on);
  assert.deepEqual(builderSettingsOf(on), {
    maxBuilds: 2,
    buildctl: "buildctl",
    basesLayout: "/srv/bases",
    builderImage: "krane.local/builder:builder",
  });
  const noBases = resolveAgentSettings({ ...base, builds: "1" }, {}, {});
  assert.equal(noBases.settings, undefined);
  assert.ok(noBases.problems.some((p) => p.startsWith("builds need buildBases")));
  assert.ok(
    resolveAgentSettings({ ...base, builds: "-1" }, {}, {}).problems.some((p) => p.startsWith("builds must be")),
  );
});
