// Notifications (tables notification_channels, notification_events, notification_deliveries,
// smtp_settings): a workspace's channels, the events to deliver to them, and the installation's
// SMTP server.
//
// The outbox: `notify(tx, notice)` runs inside the transaction of the change it reports (a pass
// that finds a rollout stuck, an agent's report of an OOM kill, …) and writes the event with one
// delivery per channel subscribed to it, so the change and its notification commit together or
// not at all, and a crash after the commit loses nothing (../notifications/deliverer.ts drains
// the deliveries, at least once). A workspace without a matching channel writes nothing.
//
// Order: events are numbered per lane (the environment, or "ws:<workspace>"), under a named lock
// of the lane, so numbers follow commit order; a channel gets a lane's events one at a time in
// that order (only the head of each (channel, lane) is ever due). Several ctrl replicas claim a
// due delivery by moving its next attempt ahead by a lease (compare-and-set on the time they
// read), so one replica sends it; a crash mid-attempt is retried when the lease ends.
//
// Health: each failed attempt counts against its channel (failures in a row, the last error);
// FAILING_AFTER in a row and the channel shows as failing; a delivery resets the count. A
// delivery still pending after the age limit is dropped (counted on the channel), which unblocks
// its lane. Credentials (a Slack URL, a webhook URL and key, the SMTP password) are sealed with a
// data key of their own scope (./data-keys.ts: the workspace's, the installation's), never
// returned and never logged.
import { sql, type Kysely } from "kysely";
import type { NotificationBody, NotificationEventType, Severity } from "../../contracts/notifications.js";
import type { WriteTx } from "../db/outbox.js";
import type {
  Database,
  NotificationChannelRow,
  NotificationDeliveryRow,
  NotificationEventRow,
  SmtpSettingsRow,
} from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { alreadyExists, failedPrecondition, notFound } from "../errors.js";
import type { Keyring } from "../secrets/keyring.js";
import type { ChannelInput, SmtpInput } from "../validate/notifications.js";
import { dataKeyFor, existingDataKey, openWith, purgeDataKeys, sealWith } from "./data-keys.js";
import { newId } from "./ids.js";
import { findWorkspace } from "./tenancy.js";

type Reader = Kysely<Database>;

/** Failed attempts in a row after which a channel shows as failing. */
export const FAILING_AFTER = 3;

/** The owner of the installation's data key (sealing the SMTP password). */
export const INSTALLATION_KEY = "installation";

export function channelSecretAad(channelId: string, what: "url" | "secret"): string {
  return `notification channel ${channelId} ${what}`;
}

const SMTP_AAD = "smtp password";

function needKeyring(keyring: Keyring | undefined): Keyring {
  if (!keyring)
    throw failedPrecondition(
      "ctrl has no master key, so it cannot keep a channel's credentials (krane ctrl serve --master-key-file)",
    );
  return keyring;
}

/** Where a URL delivers, without what could be a credential: its scheme and host. */
export function redactUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}/…`;
}

// ---------------------------------------------------------------- channels

export async function addChannel(
  store: Store,
  keyring: Keyring | undefined,
  input: ChannelInput,
): Promise<NotificationChannelRow> {
  return store.write(async (tx) => {
    const ws = await findWorkspace(tx.trx, input.workspace);
    const taken = await tx.trx
      .selectFrom("notification_channels")
      .select("id")
      .where("workspace_id", "=", ws.id)
      .where("name", "=", input.name)
      .executeTakeFirst();
    if (taken) throw alreadyExists(`channel "${input.name}" in workspace "${ws.slug}"`);
    for (const [i, name] of input.environments.entries()) {
      const [project = "", env = ""] = name.split("/");
      const found = await tx.trx
        .selectFrom("environments")
        .innerJoin("projects", "projects.id", "environments.project_id")
        .select("environments.id")
        .where("projects.workspace_id", "=", ws.id)
        .where("projects.slug", "=", project)
        .where("environments.slug", "=", env)
        .executeTakeFirst();
      if (!found) throw notFound(`environment "${name}" (environments[${i}])`);
    }
    const id = newId("nch");
    const t = input.target;
    let urlSealed: Buffer | null = null;
    let secretSealed: Buffer | null = null;
    let target: string;
    if (t.type === "email") {
      if (!(await smtpServer(tx.trx)))
        throw failedPrecondition(
          "email channels send through the installation's SMTP server, and none is named (krane notify smtp set)",
        );
      target = t.to.join(", ");
    } else {
      const key = await dataKeyFor(tx, needKeyring(keyring), ws.id);
      urlSealed = sealWith(key, t.url, channelSecretAad(id, "url"));
      if (t.type === "webhook") secretSealed = sealWith(key, t.secret, channelSecretAad(id, "secret"));
      target = redactUrl(t.url);
    }
    const row: NotificationChannelRow = {
      id,
      workspace_id: ws.id,
      name: input.name,
      type: t.type,
      target,
      config: JSON.stringify(t.type === "email" ? { to: t.to } : {}),
      url_sealed: urlSealed,
      secret_sealed: secretSealed,
      events: JSON.stringify(input.events),
      environments: JSON.stringify(input.environments),
      consecutive_failures: 0,
      last_error: null,
      last_failure_at: null,
      last_success_at: null,
      dropped: 0,
      created_at: tx.now,
    };
    await tx.trx.insertInto("notification_channels").values(row).execute();
    await noteWriteSubject(tx, id);
    return row;
  });
}

export async function channelByName(db: Reader, workspaceId: string, name: string) {
  return db
    .selectFrom("notification_channels")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("name", "=", name)
    .executeTakeFirst();
}

/** Removes a channel and what it has not delivered yet. */
export async function removeChannel(store: Store, workspaceRef: string, name: string): Promise<void> {
  await store.write(async (tx) => {
    const ws = await findWorkspace(tx.trx, workspaceRef, { includeDeleting: true });
    const ch = await channelByName(tx.trx, ws.id, name);
    if (!ch) throw notFound(`channel "${name}" in workspace "${ws.slug}"`);
    await tx.trx.deleteFrom("notification_deliveries").where("channel_id", "=", ch.id).execute();
    await tx.trx.deleteFrom("notification_channels").where("id", "=", ch.id).execute();
  });
}

/** A channel's credentials, opened in memory (never logged, never returned). */
export async function openChannel(
  db: Reader,
  keyring: Keyring | undefined,
  ch: NotificationChannelRow,
): Promise<{ url?: string; secret?: string; to?: string[] }> {
  if (ch.type === "email") {
    const cfg = JSON.parse(ch.config) as { to?: string[] };
    return { to: cfg.to ?? [] };
  }
  const key = keyring ? await existingDataKey(db, keyring, ch.workspace_id) : undefined;
  if (!key || ch.url_sealed === null) throw new Error("the channel's credentials cannot be opened (no master key)");
  return {
    url: openWith(key, ch.url_sealed, channelSecretAad(ch.id, "url")).toString("utf8"),
    secret:
      ch.secret_sealed === null
        ? undefined
        : openWith(key, ch.secret_sealed, channelSecretAad(ch.id, "secret")).toString("utf8"),
  };
}

// ---------------------------------------------------------------- the outbox

/** What a change reports: the facts; notify() adds where (workspace, project, environment). */
export interface Notice {
  type: NotificationEventType;
  severity: Severity;
  environmentId: string;
  /** A few words: "deploy failed". */
  summary: string;
  /** A sentence or two more. */
  text: string;
  region?: string | null;
  deployment?: { id: string; revision: number } | null;
  details?: NotificationBody["details"];
}

function subscribed(ch: { events: string; environments: string }, type: string, envName: string): boolean {
  const events = JSON.parse(ch.events) as string[];
  const envs = JSON.parse(ch.environments) as string[];
  return (events.length === 0 || events.includes(type)) && (envs.length === 0 || envs.includes(envName));
}

/**
 * Writes `n` for every channel of its workspace subscribed to it, in the caller's transaction.
 * Returns the event's id (its idempotency key), or undefined when no channel wanted it.
 */
export async function notify(tx: WriteTx, n: Notice): Promise<string | undefined> {
  const where = await tx.trx
    .selectFrom("environments")
    .innerJoin("projects", "projects.id", "environments.project_id")
    .innerJoin("workspaces", "workspaces.id", "environments.workspace_id")
    .select([
      "environments.workspace_id as workspaceId",
      "workspaces.slug as workspace",
      "projects.slug as project",
      "environments.slug as environment",
    ])
    .where("environments.id", "=", n.environmentId)
    .executeTakeFirst();
  if (!where) return undefined;
  const envName = `${where.project}/${where.environment}`;
  const channels = (
    await tx.trx
      .selectFrom("notification_channels")
      .select(["id", "events", "environments"])
      .where("workspace_id", "=", where.workspaceId)
      .execute()
  ).filter((ch) => subscribed(ch, n.type, envName));
  if (channels.length === 0) return undefined;

  const lane = n.environmentId;
  // One numberer of a lane at a time, so its numbers follow commit order.
  await tx.dialect.lockNamed(tx.trx, `krane notifications ${lane}`);
  const last = await tx.trx
    .selectFrom("notification_events")
    .select(sql<number | null>`max(seq)`.as("seq"))
    .where("lane", "=", lane)
    .executeTakeFirst();
  const seq = Number(last?.seq ?? 0) + 1;
  const id = newId("nev");
  const body: NotificationBody = {
    id,
    type: n.type,
    at: new Date(tx.now).toISOString(),
    severity: n.severity,
    title: `${n.summary}: ${envName}`,
    text: n.text,
    workspace: where.workspace,
    project: where.project,
    environment: where.environment,
    region: n.region ?? null,
    revision: n.deployment?.revision ?? null,
    deployment_id: n.deployment?.id ?? null,
    details: n.details ?? {},
  };
  await tx.trx
    .insertInto("notification_events")
    .values({
      id,
      workspace_id: where.workspaceId,
      environment_id: n.environmentId,
      lane,
      seq,
      type: n.type,
      at: tx.now,
      body: JSON.stringify(body),
    })
    .execute();
  await tx.trx
    .insertInto("notification_deliveries")
    .values(
      channels.map((ch) => ({
        channel_id: ch.id,
        event_id: id,
        lane,
        seq,
        state: "pending",
        attempts: 0,
        next_attempt_at: tx.now,
        last_error: null,
        created_at: tx.now,
        done_at: null,
      })),
    )
    .execute();
  return id;
}

// ---------------------------------------------------------------- delivering

/** A delivery's key on the deliverer's queue. */
export function deliveryKey(channelId: string, eventId: string): string {
  return `${channelId} ${eventId}`;
}

export function parseDeliveryKey(key: string): { channelId: string; eventId: string } {
  const [channelId = "", eventId = ""] = key.split(" ");
  return { channelId, eventId };
}

/** Takes a due delivery for `leaseMs` when nobody took it since `seen` was read. */
async function claim(
  db: Reader,
  d: Pick<NotificationDeliveryRow, "channel_id" | "event_id" | "next_attempt_at">,
  now: number,
  leaseMs: number,
): Promise<boolean> {
  const res = await db
    .updateTable("notification_deliveries")
    .set({ next_attempt_at: now + leaseMs })
    .where("channel_id", "=", d.channel_id)
    .where("event_id", "=", d.event_id)
    .where("state", "=", "pending")
    .where("next_attempt_at", "=", d.next_attempt_at)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}

/** Claims up to `limit` due deliveries, each the oldest pending one of its (channel, lane). */
export async function claimDueDeliveries(store: Store, limit: number, leaseMs: number): Promise<string[]> {
  const now = store.clock();
  const due = await store.db
    .selectFrom("notification_deliveries as d")
    .select(["d.channel_id", "d.event_id", "d.next_attempt_at"])
    .where("d.state", "=", "pending")
    .where("d.next_attempt_at", "<=", now)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom("notification_deliveries as e")
            .select("e.seq")
            .whereRef("e.channel_id", "=", "d.channel_id")
            .whereRef("e.lane", "=", "d.lane")
            .where("e.state", "=", "pending")
            .whereRef("e.seq", "<", "d.seq"),
        ),
      ),
    )
    .orderBy("d.next_attempt_at")
    .limit(limit)
    .execute();
  const out: string[] = [];
  for (const d of due) {
    if (await claim(store.db, { ...d, next_attempt_at: Number(d.next_attempt_at) }, now, leaseMs))
      out.push(deliveryKey(d.channel_id, d.event_id));
  }
  return out;
}

/** What one attempt needs: the delivery, its event and its channel (undefined: gone or done). */
export async function deliveryToAttempt(
  db: Reader,
  key: string,
): Promise<
  { delivery: NotificationDeliveryRow; event: NotificationEventRow; channel: NotificationChannelRow } | undefined
> {
  const { channelId, eventId } = parseDeliveryKey(key);
  const delivery = await db
    .selectFrom("notification_deliveries")
    .selectAll()
    .where("channel_id", "=", channelId)
    .where("event_id", "=", eventId)
    .executeTakeFirst();
  if (!delivery || delivery.state !== "pending") return undefined;
  const event = await db.selectFrom("notification_events").selectAll().where("id", "=", eventId).executeTakeFirst();
  const channel = await db
    .selectFrom("notification_channels")
    .selectAll()
    .where("id", "=", channelId)
    .executeTakeFirst();
  if (!event || !channel) return undefined;
  return { delivery, event, channel };
}

/**
 * Records a delivery the receiver took, and claims the next one of its lane when it is due
 * (returned: run it now rather than at the next sweep).
 */
export async function recordDelivered(store: Store, key: string, leaseMs: number): Promise<string | undefined> {
  const { channelId, eventId } = parseDeliveryKey(key);
  return store.write(async (tx) => {
    const d = await tx.trx
      .updateTable("notification_deliveries")
      .set((eb) => ({ state: "delivered", done_at: tx.now, attempts: eb("attempts", "+", 1), last_error: null }))
      .where("channel_id", "=", channelId)
      .where("event_id", "=", eventId)
      .where("state", "=", "pending")
      .returning(["lane"])
      .executeTakeFirst();
    await tx.trx
      .updateTable("notification_channels")
      .set({ consecutive_failures: 0, last_success_at: tx.now })
      .where("id", "=", channelId)
      .execute();
    if (!d) return undefined;
    const next = await tx.trx
      .selectFrom("notification_deliveries")
      .select(["channel_id", "event_id", "next_attempt_at"])
      .where("channel_id", "=", channelId)
      .where("lane", "=", d.lane)
      .where("state", "=", "pending")
      .orderBy("seq")
      .limit(1)
      .executeTakeFirst();
    if (!next || Number(next.next_attempt_at) > tx.now) return undefined;
    return (await claim(tx.trx, { ...next, next_attempt_at: Number(next.next_attempt_at) }, tx.now, leaseMs))
      ? deliveryKey(next.channel_id, next.event_id)
      : undefined;
  });
}

/** Records a failed attempt: tried again at `retryAt`; the channel counts one more failure. */
export async function recordFailure(store: Store, key: string, error: string, retryAt: number): Promise<void> {
  const { channelId, eventId } = parseDeliveryKey(key);
  const why = error.slice(0, 500);
  await store.write(async (tx) => {
    const res = await tx.trx
      .updateTable("notification_deliveries")
      .set((eb) => ({ attempts: eb("attempts", "+", 1), next_attempt_at: retryAt, last_error: why }))
      .where("channel_id", "=", channelId)
      .where("event_id", "=", eventId)
      .where("state", "=", "pending")
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) return;
    await tx.trx
      .updateTable("notification_channels")
      .set((eb) => ({
        consecutive_failures: eb("consecutive_failures", "+", 1),
        last_error: why,
        last_failure_at: tx.now,
      }))
      .where("id", "=", channelId)
      .execute();
  });
}

/** Makes a channel's waiting deliveries due now (a test message got through: its receiver is back). Returns how many. */
export async function channelDueNow(store: Store, channelId: string): Promise<number> {
  return store.write(async (tx) => {
    const res = await tx.trx
      .updateTable("notification_deliveries")
      .set({ next_attempt_at: tx.now })
      .where("channel_id", "=", channelId)
      .where("state", "=", "pending")
      .where("next_attempt_at", ">", tx.now)
      .executeTakeFirst();
    return Number(res.numUpdatedRows);
  });
}

/** Attempts a delivery has had (its backoff counts from them). */
export async function attemptsOf(db: Reader, key: string): Promise<number> {
  const { channelId, eventId } = parseDeliveryKey(key);
  const row = await db
    .selectFrom("notification_deliveries")
    .select("attempts")
    .where("channel_id", "=", channelId)
    .where("event_id", "=", eventId)
    .executeTakeFirst();
  return Number(row?.attempts ?? 0);
}

/** Gives up the deliveries pending since before `before` (counted on their channels); returns how many. */
export async function dropExpiredDeliveries(store: Store, before: number): Promise<number> {
  return store.write(async (tx) => {
    const old = await tx.trx
      .selectFrom("notification_deliveries")
      .select(["channel_id", sql<number>`count(*)`.as("n")])
      .where("state", "=", "pending")
      .where("created_at", "<", before)
      .groupBy("channel_id")
      .execute();
    if (old.length === 0) return 0;
    await tx.trx
      .updateTable("notification_deliveries")
      .set({ state: "dropped", done_at: tx.now })
      .where("state", "=", "pending")
      .where("created_at", "<", before)
      .execute();
    let total = 0;
    for (const o of old) {
      const n = Number(o.n);
      total += n;
      await tx.trx
        .updateTable("notification_channels")
        .set((eb) => ({ dropped: eb("dropped", "+", n) }))
        .where("id", "=", o.channel_id)
        .execute();
    }
    return total;
  });
}

/**
 * Forgets deliveries finished before `before` and events older than that with nothing pending;
 * a lane's newest event stays (its number is where the lane counts on from). Returns the events forgotten.
 */
export async function pruneNotifications(store: Store, before: number): Promise<number> {
  return store.write(async (tx) => {
    await tx.trx
      .deleteFrom("notification_deliveries")
      .where("state", "!=", "pending")
      .where("done_at", "<", before)
      .execute();
    const res = await tx.trx
      .deleteFrom("notification_events")
      .where("at", "<", before)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom("notification_deliveries")
              .select("event_id")
              .whereRef("notification_deliveries.event_id", "=", "notification_events.id"),
          ),
        ),
      )
      .where(
        sql<boolean>`seq < (select max(newest.seq) from notification_events newest where newest.lane = notification_events.lane)`,
      )
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  });
}

/** Deletes a workspace's channels, events and deliveries, and its data key (the end of its deletion). */
export async function purgeWorkspaceNotifications(tx: WriteTx, workspaceId: string): Promise<void> {
  const channels = await tx.trx
    .selectFrom("notification_channels")
    .select("id")
    .where("workspace_id", "=", workspaceId)
    .execute();
  for (let i = 0; i < channels.length; i += 200)
    await tx.trx
      .deleteFrom("notification_deliveries")
      .where(
        "channel_id",
        "in",
        channels.slice(i, i + 200).map((c) => c.id),
      )
      .execute();
  await tx.trx.deleteFrom("notification_channels").where("workspace_id", "=", workspaceId).execute();
  await tx.trx.deleteFrom("notification_events").where("workspace_id", "=", workspaceId).execute();
  await purgeDataKeys(tx, workspaceId);
}

// ---------------------------------------------------------------- SMTP

export async function smtpServer(db: Reader): Promise<SmtpSettingsRow | undefined> {
  return db.selectFrom("smtp_settings").selectAll().where("id", "=", INSTALLATION_KEY).executeTakeFirst();
}

/** Names (or, with null, removes) the installation's SMTP server; the caller checked that it answers. */
export async function setSmtpServer(
  store: Store,
  keyring: Keyring | undefined,
  input: SmtpInput | null,
): Promise<SmtpSettingsRow | undefined> {
  return store.write(async (tx) => {
    if (input === null) {
      await tx.trx.deleteFrom("smtp_settings").where("id", "=", INSTALLATION_KEY).execute();
      return undefined;
    }
    const password =
      input.password === ""
        ? null
        : sealWith(await dataKeyFor(tx, needKeyring(keyring), INSTALLATION_KEY), input.password, SMTP_AAD);
    const row: SmtpSettingsRow = {
      id: INSTALLATION_KEY,
      host: input.host,
      port: input.port,
      security: input.security,
      username: input.username,
      password_sealed: password,
      from_address: input.from,
      updated_at: tx.now,
    };
    await tx.trx
      .insertInto("smtp_settings")
      .values(row)
      .onConflict((oc) => oc.column("id").doUpdateSet({ ...row, id: undefined }))
      .execute();
    return row;
  });
}

/** The SMTP password, opened in memory. */
export async function openSmtpPassword(
  db: Reader,
  keyring: Keyring | undefined,
  row: SmtpSettingsRow,
): Promise<string | undefined> {
  if (row.password_sealed === null) return undefined;
  const key = keyring ? await existingDataKey(db, keyring, INSTALLATION_KEY) : undefined;
  if (!key) throw new Error("the SMTP password cannot be opened (no master key)");
  return openWith(key, row.password_sealed, SMTP_AAD).toString("utf8");
}
