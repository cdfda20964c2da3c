// Validation of channels and the SMTP server: a receiver URL must be https:// (http:// only to
// this machine, and this machine only where the installation allows it, link-local addresses
// included; a name is resolved again at delivery), every refusal names its field, and nothing is
// echoed back.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { DeliveryError, refuseLocalReceiver, type Resolve } from "../../../../src/ctrl/notifications/send.js";
import {
  isLocalHost,
  receiverUrl,
  validateAddChannel,
  validateSmtpServer,
} from "../../../../src/ctrl/validate/notifications.js";

function refusal(fn: () => unknown): { field: string | undefined; message: string } | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof DomainError) return { field: err.field, message: err.message };
    throw err;
  }
  return undefined;
}

const channel = (target: Parameters<typeof validateAddChannel>[0]["target"], over = {}) => ({
  workspace: "acme",
  name: "ops",
  target,
  events: [],
  environments: [],
  ...over,
});

describe("receiverUrl", () => {
  it("takes https:// anywhere but this machine", () => {
    assert.equal(
      receiverUrl("url", "https://hooks.slack.com/services/T/B/x", false),
      "https://hooks.slack.com/services/T/B/x",
    );
  });

  it("refuses a URL that is not https, naming the field", () => {
    for (const url of ["http://hooks.example.com/x", "ftp://example.com/", "not a url", ""])
      assert.equal(refusal(() => receiverUrl("webhook.url", url, true))?.field, "webhook.url", url);
  });

  it("refuses this machine and link-local addresses unless the installation allows them", () => {
    for (const url of [
      "http://127.0.0.1:8080/hook",
      "https://localhost/hook",
      "http://[::1]:9/x",
      "https://169.254.169.254/latest/meta-data",
      "https://[fe80::1]/",
      "http://0.0.0.0/",
    ]) {
      assert.equal(refusal(() => receiverUrl("slack.url", url, false))?.field, "slack.url", url);
      assert.equal(
        refusal(() => receiverUrl("slack.url", url, true)),
        undefined,
        url,
      );
    }
  });

  it("tells loopback from ordinary hosts", () => {
    assert.ok(isLocalHost("127.1.2.3"));
    assert.ok(isLocalHost("app.localhost"));
    assert.ok(!isLocalHost("128.0.0.1"));
    assert.ok(!isLocalHost("example.com"));
  });
});

describe("validateAddChannel", () => {
  it("names the field of each refusal, without echoing the secret", () => {
    const cases: [Parameters<typeof validateAddChannel>[0], string][] = [
      [channel({ case: "slack", value: { url: "http://hooks.example.com/x" } }), "slack.url"],
      [channel({ case: "webhook", value: { url: "https://r.example.com/", secret: "short" } }), "webhook.secret"],
      [channel({ case: "email", value: { to: [] } }), "email.to"],
      [channel({ case: "email", value: { to: ["ops@example.com", "nope"] } }), "email.to[1]"],
      [channel({ case: undefined }), "target"],
      [
        channel({ case: "slack", value: { url: "https://h.example.com/" } }, { events: ["deploy.exploded"] }),
        "events[0]",
      ],
      [
        channel({ case: "slack", value: { url: "https://h.example.com/" } }, { environments: ["shop"] }),
        "environments[0]",
      ],
      [channel({ case: "slack", value: { url: "https://h.example.com/" } }, { name: "Not A Slug" }), "name"],
    ];
    for (const [req, field] of cases) {
      const r = refusal(() => validateAddChannel(req, false));
      assert.equal(r?.field, field, JSON.stringify(req));
      assert.doesNotMatch(r.message, /short/);
    }
  });

  it("sorts and keeps what it was given", () => {
    const v = validateAddChannel(
      channel(
        { case: "webhook", value: { url: "https://r.example.com/in", secret: "0123456789abcdef" } },
        { events: ["rollback", "deploy.failed"], environments: ["shop/prod", "api/prod"] },
      ),
      false,
    );
    assert.deepEqual(v.events, ["deploy.failed", "rollback"]);
    assert.deepEqual(v.environments, ["api/prod", "shop/prod"]);
    assert.deepEqual(v.target, { type: "webhook", url: "https://r.example.com/in", secret: "0123456789abcdef" });
  });
});

describe("validateSmtpServer", () => {
  const smtp = {
    host: "smtp.example.com",
    port: 0,
    security: "",
    username: "",
    password: "",
    from: "krane@example.com",
  };

  it("fills the port from the security mode; an empty host removes the server", () => {
    assert.equal(validateSmtpServer(smtp)?.port, 587);
    assert.equal(validateSmtpServer({ ...smtp, security: "tls" })?.port, 465);
    assert.equal(validateSmtpServer({ ...smtp, host: "" }), null);
  });

  it("names the field of each refusal", () => {
    const cases: [typeof smtp, string][] = [
      [{ ...smtp, host: "bad host" }, "host"],
      [{ ...smtp, security: "ssl" }, "security"],
      [{ ...smtp, port: 70_000 }, "port"],
      [{ ...smtp, username: "u" }, "password"],
      [{ ...smtp, password: "p" }, "username"],
      [{ ...smtp, from: "krane" }, "from"],
    ];
    for (const [req, field] of cases)
      assert.equal(refusal(() => validateSmtpServer(req))?.field, field, JSON.stringify(req));
  });
});

describe("refuseLocalReceiver", () => {
  const resolving =
    (addresses: string[]): Resolve =>
    async () =>
      addresses;

  it("refuses a name that resolves to this machine or link-local, at delivery", async () => {
    for (const a of ["127.0.0.1", "::1", "169.254.169.254", "::ffff:127.0.0.1"])
      await assert.rejects(
        refuseLocalReceiver("https://hooks.example.com/x", resolving(["93.184.216.34", a])),
        (e) => e instanceof DeliveryError && e.message.includes(a),
        a,
      );
    await refuseLocalReceiver("https://hooks.example.com/x", resolving(["93.184.216.34", "2606:2800::1"]));
  });

  it("says when a name does not resolve, and leaves addresses to the URL's own check", async () => {
    await assert.rejects(
      refuseLocalReceiver("https://nowhere.example/x", () => Promise.reject(new Error("ENOTFOUND"))),
      /does not resolve/,
    );
    await refuseLocalReceiver("https://93.184.216.34/x", () => Promise.reject(new Error("not asked")));
  });
});
