// NotificationService: a workspace's channels (add, list with their delivery state, remove, test),
// and the installation's SMTP server. Credentials go in and are never
// answered: a channel shows where it delivers (a URL's scheme and host, the recipients), the SMTP
// server whether it has a password.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  NotificationChannelSchema,
  SmtpServerSchema,
  type NotificationService,
} from "../../gen/krane/ctrl/v1/notify_pb.js";
import type { SmtpSettingsRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import {
  addChannel,
  channelByName,
  channelDueNow,
  removeChannel,
  setSmtpServer,
  smtpServer,
} from "../domain/notifications.js";
import { findWorkspace } from "../domain/tenancy.js";
import { invalidArgument, notFound } from "../errors.js";
import type { NotificationDeliverer } from "../notifications/deliverer.js";
import { checkSmtpServer } from "../notifications/send.js";
import { listChannels, type ChannelView } from "../read/notifications.js";
import type { Keyring } from "../secrets/keyring.js";
import { workspaceRef } from "../validate/api.js";
import { validateAddChannel, validateChannelRef, validateSmtpServer } from "../validate/notifications.js";

export interface NotificationApiDeps {
  store: Store;
  keyring: Keyring | undefined;
  /** Receivers on this machine are allowed (the installation's --notify-allow-loopback). */
  allowLoopback: boolean;
  deliverer: NotificationDeliverer;
  /** How long SetSmtpServer waits for the server (ms; default 10 s). */
  smtpCheckTimeoutMs?: number;
}

function channelMsg(v: ChannelView) {
  const c = v.channel;
  return create(NotificationChannelSchema, {
    name: c.name,
    type: c.type,
    target: c.target,
    events: JSON.parse(c.events) as string[],
    environments: JSON.parse(c.environments) as string[],
    state: v.state,
    consecutiveFailures: Number(c.consecutive_failures),
    lastError: c.last_error ?? "",
    lastFailureUnixMs: BigInt(c.last_failure_at ?? 0),
    lastSuccessUnixMs: BigInt(c.last_success_at ?? 0),
    pending: BigInt(v.pending),
    dropped: BigInt(c.dropped),
    createdAtUnixMs: BigInt(c.created_at),
  });
}

function smtpMsg(s: SmtpSettingsRow) {
  return create(SmtpServerSchema, {
    host: s.host,
    port: s.port,
    security: s.security,
    username: s.username,
    hasPassword: s.password_sealed !== null,
    from: s.from_address,
    updatedAtUnixMs: BigInt(s.updated_at),
  });
}

export function notificationServiceImpl(d: NotificationApiDeps): ServiceImpl<typeof NotificationService> {
  const { store } = d;
  return {
    async addChannel(req) {
      const input = validateAddChannel(req, d.allowLoopback);
      const row = await addChannel(store, d.keyring, input);
      const view = (await listChannels(store.db, row.workspace_id)).find((v) => v.channel.id === row.id);
      return { channel: view ? channelMsg(view) : undefined };
    },
    async listChannels(req) {
      const ws = await findWorkspace(store.db, workspaceRef("workspace", req.workspace), { includeDeleting: true });
      return { channels: (await listChannels(store.db, ws.id)).map(channelMsg) };
    },
    async removeChannel(req) {
      const ref = validateChannelRef(req);
      await removeChannel(store, ref.workspace, ref.name);
      return {};
    },
    async testChannel(req) {
      const ref = validateChannelRef(req);
      const ws = await findWorkspace(store.db, ref.workspace);
      const ch = await channelByName(store.db, ws.id, ref.name);
      if (!ch) throw notFound(`channel "${ref.name}" in workspace "${ws.slug}"`);
      const res = await d.deliverer.sendTest(ch, ws.slug);
      // The receiver is back: what waits for it need not sit out its backoff.
      if (res.delivered && (await channelDueNow(store, ch.id)) > 0) void d.deliverer.sweep();
      return res;
    },
    async setSmtpServer(req) {
      const input = validateSmtpServer(req);
      if (input !== null) {
        try {
          await checkSmtpServer({ ...input, password: input.password }, d.smtpCheckTimeoutMs ?? 10_000);
        } catch (err) {
          const why = err instanceof Error ? err.message : String(err);
          throw invalidArgument("host", `the SMTP server ${input.host}:${input.port} does not answer as one: ${why}`);
        }
      }
      const row = await setSmtpServer(store, d.keyring, input);
      return { server: row ? smtpMsg(row) : undefined };
    },
    async getSmtpServer() {
      const row = await smtpServer(store.db);
      return { server: row ? smtpMsg(row) : undefined };
    },
  };
}
