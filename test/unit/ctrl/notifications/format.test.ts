// Rendering an event for each channel: Slack's incoming-webhook payload checked against the
// fields Slack documents for a message (`text`, legacy `attachments` and their fields), text from
// outside krane escaped so it cannot mention or link, and an email's subject kept to one line.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { NotificationBody } from "../../../../src/contracts/notifications.js";
import { emailMessage, escapeMrkdwn, slackMessage } from "../../../../src/ctrl/notifications/format.js";

function body(over: Partial<NotificationBody> = {}): NotificationBody {
  return {
    id: "nev_0123456789abcdefghij",
    type: "deploy.failed",
    at: "2026-11-29T11:00:00.000Z",
    severity: "critical",
    title: "deploy failed in eu: shop/production",
    text: "Revision 7 (registry.example/shop:7) made no progress in region eu within its progress deadline.",
    workspace: "acme",
    project: "shop",
    environment: "production",
    region: "eu",
    revision: 7,
    deployment_id: "dep_0123456789abcdefghij",
    details: { image: "registry.example/shop:7", reason: "ProgressDeadlineExceeded" },
    ...over,
  };
}

// Slack's documented message payload for incoming webhooks (api.slack.com/messaging/webhooks,
// "Secondary message attachments" reference): the top-level fields and, per attachment, the
// legacy fields with their types. Anything else is not part of the format.
type Kind = "string" | "integer" | "boolean" | "array" | "object";
const MESSAGE_FIELDS: Record<string, Kind> = {
  text: "string",
  attachments: "array",
  blocks: "array",
  thread_ts: "string",
  mrkdwn: "boolean",
};
const ATTACHMENT_FIELDS: Record<string, Kind> = {
  fallback: "string",
  color: "string",
  pretext: "string",
  author_name: "string",
  author_link: "string",
  author_icon: "string",
  title: "string",
  title_link: "string",
  text: "string",
  fields: "array",
  image_url: "string",
  thumb_url: "string",
  footer: "string",
  footer_icon: "string",
  ts: "integer",
  mrkdwn_in: "array",
};
const FIELD_FIELDS: Record<string, Kind> = { title: "string", value: "string", short: "boolean" };

function kindOf(v: unknown): Kind | "other" {
  if (typeof v === "string") return "string";
  if (typeof v === "boolean") return "boolean";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "other";
  if (Array.isArray(v)) return "array";
  return v !== null && typeof v === "object" ? "object" : "other";
}

/** The problems of `v` against a documented field list ([] when it conforms). */
function check(v: unknown, fields: Record<string, Kind>, at: string): string[] {
  if (kindOf(v) !== "object") return [`${at} is not an object`];
  const out: string[] = [];
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    const want = fields[k];
    if (want === undefined) out.push(`${at}.${k} is not a documented field`);
    else if (kindOf(x) !== want) out.push(`${at}.${k} is ${kindOf(x)}, documented as ${want}`);
  }
  return out;
}

function slackProblems(payload: unknown): string[] {
  const out = check(payload, MESSAGE_FIELDS, "message");
  const p = payload as { text?: unknown; attachments?: unknown[] };
  if (typeof p.text !== "string" || p.text === "") out.push("message.text is required (the notification's text)");
  for (const [i, a] of (p.attachments ?? []).entries()) {
    out.push(...check(a, ATTACHMENT_FIELDS, `attachments[${i}]`));
    const att = a as { color?: string; fallback?: string; fields?: unknown[] };
    if (att.color !== undefined && !/^#[0-9a-f]{6}$|^(good|warning|danger)$/i.test(att.color))
      out.push(`attachments[${i}].color is neither a hex colour nor good/warning/danger`);
    if (typeof att.fallback !== "string" || att.fallback === "") out.push(`attachments[${i}].fallback is required`);
    for (const [j, f] of (att.fields ?? []).entries())
      out.push(...check(f, FIELD_FIELDS, `attachments[${i}].fields[${j}]`));
  }
  if (JSON.stringify(payload).length > 40_000) out.push("longer than Slack takes");
  return out;
}

describe("the schema check", () => {
  it("finds what Slack's format does not have", () => {
    assert.deepEqual(slackProblems({ text: "x", attachments: [{ fallback: "x", colour: "#000000" }] }), [
      "attachments[0].colour is not a documented field",
    ]);
    assert.deepEqual(slackProblems({ text: "x", attachments: [{ fallback: "x", ts: 1.5 }] }), [
      "attachments[0].ts is other, documented as integer",
    ]);
    assert.deepEqual(slackProblems({ attachments: [] }), ["message.text is required (the notification's text)"]);
  });
});

describe("slackMessage", () => {
  it("is a message in Slack's documented format for every severity and event", () => {
    for (const severity of ["info", "success", "warning", "critical"] as const) {
      const m = slackMessage(body({ severity }));
      assert.deepEqual(slackProblems(m), [], severity);
    }
    const m = slackMessage(body());
    const a = m.attachments[0];
    assert.ok(a);
    assert.equal(a.ts, Date.parse("2026-11-29T11:00:00.000Z") / 1000);
    assert.deepEqual(
      a.fields.map((f) => [f.title, f.value]),
      [
        ["environment", "acme/shop/production"],
        ["region", "eu"],
        ["revision", "7"],
        ["image", "registry.example/shop:7"],
        ["reason", "ProgressDeadlineExceeded"],
      ],
    );
    assert.match(a.footer, /nev_0123456789abcdefghij/);
  });

  it("stays in the format, and mentions or links nobody, whatever text an event carries", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 5000 }), fc.string(), fc.string(), (text, title, detail) => {
        const m = slackMessage(body({ text, title, details: { message: detail } }));
        assert.deepEqual(slackProblems(m), []);
        const a = m.attachments[0];
        assert.ok(a);
        for (const s of [m.text, a.title, a.text, ...a.fields.map((f) => f.value)]) assert.doesNotMatch(s, /[<>]/);
      }),
    );
  });

  it("escapes Slack's three entities", () => {
    assert.equal(escapeMrkdwn("<!channel> & <https://x|y>"), "&lt;!channel&gt; &amp; &lt;https://x|y&gt;");
    const m = slackMessage(body({ text: "kubelet: <!here> OOM" }));
    assert.equal(m.attachments[0]?.text, "kubelet: &lt;!here&gt; OOM");
  });
});

describe("emailMessage", () => {
  it("has a one-line subject whatever the title holds", () => {
    fc.assert(
      fc.property(fc.string(), (title) => {
        const m = emailMessage(body({ title }));
        assert.doesNotMatch(m.subject, /[\r\n]/);
        assert.ok(m.subject.length <= 200);
      }),
    );
  });

  it("carries the facts and the event's id", () => {
    const m = emailMessage(body());
    assert.equal(m.subject, "[krane] deploy failed in eu: shop/production");
    assert.match(m.text, /^environment: acme\/shop\/production$/m);
    assert.match(m.text, /id nev_0123456789abcdefghij/);
  });
});
