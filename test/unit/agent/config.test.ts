import { test } from "node:test";
import assert from "node:assert/strict";
import { parseConfigFile, resolveAgentSettings } from "../../../src/agent/config.js";

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
