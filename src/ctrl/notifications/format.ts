// An event's body (../../contracts/notifications.ts) in each channel's format. Pure.
//
// Slack's incoming webhooks take `text` (mrkdwn, also the notification's fallback) and legacy
// `attachments` (fallback, color, title, text, fields): the subset Mattermost and Rocket.Chat
// render too, where Block Kit `blocks` are ignored. Text from outside krane (an image name, the
// kubelet's message, a verdict) is escaped: in mrkdwn `<…>` is a link or a mention
// (`<!channel>`), and `&`, `<`, `>` must be sent as entities. Slack cuts `text` at 40,000
// characters; every text here stays far below (fields are cut at FIELD_MAX).
import type { NotificationBody, Severity } from "../../contracts/notifications.js";

const COLOR: Record<Severity, string> = {
  success: "#2eb67d",
  info: "#439fe0",
  warning: "#daa038",
  critical: "#e01e5a",
};

const ICON: Record<Severity, string> = { success: "✅", info: "ℹ️", warning: "⚠️", critical: "🚨" };

const FIELD_MAX = 300;
const TEXT_MAX = 2_000;

function cut(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/** Slack's three entities: what is left of `<…>` can no longer link or mention anyone. */
export function escapeMrkdwn(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** The facts worth a line each: where, then the event's details. */
export function facts(b: NotificationBody): [string, string][] {
  const out: [string, string][] = [];
  if (b.project !== null && b.environment !== null)
    out.push(["environment", `${b.workspace}/${b.project}/${b.environment}`]);
  else out.push(["workspace", b.workspace]);
  if (b.region !== null) out.push(["region", b.region]);
  if (b.revision !== null) out.push(["revision", String(b.revision)]);
  for (const [k, v] of Object.entries(b.details)) if (v !== null && v !== "") out.push([k, String(v)]);
  return out.slice(0, 12);
}

export interface SlackField {
  title: string;
  value: string;
  short: boolean;
}

export interface SlackMessage {
  text: string;
  attachments: {
    fallback: string;
    color: string;
    title: string;
    text: string;
    fields: SlackField[];
    footer: string;
    ts: number;
  }[];
}

export function slackMessage(b: NotificationBody): SlackMessage {
  const title = escapeMrkdwn(cut(b.title, FIELD_MAX));
  return {
    text: `${ICON[b.severity]} *${title}*`,
    attachments: [
      {
        fallback: cut(`${b.title}: ${b.text}`, TEXT_MAX),
        color: COLOR[b.severity],
        title,
        text: escapeMrkdwn(cut(b.text, TEXT_MAX)),
        fields: facts(b).map(([k, v]) => ({
          title: k,
          value: escapeMrkdwn(cut(v, FIELD_MAX)),
          short: v.length <= 40,
        })),
        footer: `krane · ${b.type} · ${b.id}`,
        ts: Math.floor(Date.parse(b.at) / 1000),
      },
    ],
  };
}

export interface EmailMessage {
  subject: string;
  text: string;
}

export function emailMessage(b: NotificationBody): EmailMessage {
  const lines = [b.title, "", b.text, "", ...facts(b).map(([k, v]) => `${k}: ${cut(v, FIELD_MAX)}`), ""];
  lines.push(`event ${b.type}, ${b.at}, id ${b.id}`);
  // A subject is one line: anything that could start a header of its own goes.
  const subject = `[krane] ${b.title}`.replace(/[\r\n]+/g, " ");
  return { subject: cut(subject, 200), text: `${lines.join("\n")}\n` };
}
