// What each call that changes state is about, read as a view (./diff.ts) before and after its
// change, inside the change's own transaction: the audit event's chain (the workspace, or the
// installation), its target ids and the fields the diff compares.
//
// One view per kind of thing a call changes: a workspace, a project, an environment (with
// everything configured on it: regions, sentinel and rollout settings, configuration, secrets,
// endpoints, domains, jobs, releases, pending rollout commands, its preview record), a
// deployment (a deploy: its environment and the revision it created), a region, a cluster, an API
// token, a preview hook, a workspace's preview limits, a notification channel, the SMTP server. A call's view has the same shape before and
// after it, so the diff is what the call changed.
// Secrets, tokens and webhook secrets are `Sensitive` (compared by when or how they were set,
// never shown). Which view a method's event gets is declared beside the method in its proto
// (`audit` and `audit_field` of its policy: ../auth/policy.ts); a method that changes state with no
// view is still audited, with its workspace and no diff.
import type { Kysely } from "kysely";
import type { DescMethod } from "@bufbuild/protobuf";
import { AuditSubject as Declared, policyOf } from "../auth/policy.js";
import { higherRole, isRoleName, type RoleName } from "../../contracts/roles.js";
import { parseJsonList, type Database } from "../db/schema.js";
import { clusterTokenRevoked } from "../domain/clusters.js";
import { INSTALLATION_CHAIN } from "../domain/audit.js";
import { quotaRow } from "../domain/quotas.js";
import { Sensitive, type ViewTree, type ViewValue } from "./diff.js";

type Reader = Kysely<Database>;

/** A call's request message, read by field name (protobuf-es messages are plain objects). */
export type RequestFields = Readonly<Record<string, unknown>>;

export interface AuditSubject {
  /** The chain the event goes to. */
  workspaceId: string;
  /** Ids, most specific last. */
  targets: string[];
  /** Null: the thing does not exist (before a create, after a delete). */
  view: ViewTree | null;
}

function field(req: RequestFields, name: string): string {
  const v = req[name];
  return typeof v === "string" ? v : "";
}

function json(text: string | null): ViewValue {
  if (text === null) return null;
  try {
    return JSON.parse(text) as ViewValue;
  } catch {
    return text;
  }
}

async function workspaceRow(db: Reader, ref: string) {
  if (ref === "") return undefined;
  return db
    .selectFrom("workspaces")
    .select(["id", "slug", "name", "deleting_at"])
    .where(ref.startsWith("ws_") ? "id" : "slug", "=", ref)
    .executeTakeFirst();
}

/** The workspace a request names (slug or id), when it exists: its chain. */
export async function workspaceIdOf(db: Reader, req: RequestFields): Promise<string | undefined> {
  const ws = field(req, "workspace");
  if (ws !== "") return (await workspaceRow(db, ws))?.id;
  const dep = field(req, "deploymentId");
  if (dep !== "")
    return (await db.selectFrom("deployments").select("workspace_id").where("id", "=", dep).executeTakeFirst())
      ?.workspace_id;
  return undefined;
}

async function projectRow(db: Reader, workspaceId: string, ref: string) {
  if (ref === "") return undefined;
  return db
    .selectFrom("projects")
    .select(["id", "slug", "name", "deleting_at"])
    .where("workspace_id", "=", workspaceId)
    .where(ref.startsWith("prj_") ? "id" : "slug", "=", ref)
    .executeTakeFirst();
}

const numOrNull = (v: number | null): number | null => (v === null ? null : Number(v));

async function workspaceSubject(db: Reader, ref: string): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, ref);
  if (!w) return undefined;
  const registries = await db
    .selectFrom("registry_credentials")
    .select(["host", "username", "updated_at"])
    .where("workspace_id", "=", w.id)
    .orderBy("host")
    .execute();
  const quotas = await quotaRow(db, w.id);
  return {
    workspaceId: w.id,
    targets: [w.id],
    view: {
      workspace: { slug: w.slug, name: w.name, deleting: w.deleting_at !== null },
      // The quotas it set itself (null: the installation's default, -1: unlimited).
      ...(quotas === undefined
        ? {}
        : {
            quotas: {
              cpu_millicores: numOrNull(quotas.cpu_millicores),
              memory_mib: numOrNull(quotas.memory_mib),
              instances: numOrNull(quotas.instances),
              environments: numOrNull(quotas.environments),
              previews: numOrNull(quotas.previews),
              build_minutes: numOrNull(quotas.build_minutes),
            },
          }),
      // Never a password: who, and when it was last set (absent while there is none).
      ...(registries.length === 0
        ? {}
        : {
            registries: Object.fromEntries(
              registries.map((r) => [
                r.host,
                { username: r.username, password: new Sensitive(String(Number(r.updated_at))) },
              ]),
            ),
          }),
    },
  };
}

async function projectSubject(db: Reader, wsRef: string, ref: string): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const p = await projectRow(db, w.id, ref);
  return {
    workspaceId: w.id,
    targets: p ? [w.id, p.id] : [w.id],
    view: p ? { project: { slug: p.slug, name: p.name, deleting: p.deleting_at !== null } } : null,
  };
}

/** Everything configured on an environment, as one tree. */
async function environmentView(db: Reader, envId: string): Promise<ViewTree | null> {
  const e = await db.selectFrom("environments").selectAll().where("id", "=", envId).executeTakeFirst();
  if (!e) return null;
  const [regions, config, secrets, endpoints, domains, jobs, releases, progressive, rollouts, preview] =
    await Promise.all([
      db.selectFrom("environment_regions").select(["region", "replicas"]).where("environment_id", "=", envId).execute(),
      db.selectFrom("environment_config").select(["key", "value"]).where("environment_id", "=", envId).execute(),
      db
        .selectFrom("environment_secrets")
        .select(["key", "source", "external_path", "updated_at"])
        .where("environment_id", "=", envId)
        .execute(),
      db
        .selectFrom("endpoints")
        .select(["visibility", "hostname", "path_prefix", "auth"])
        .where("environment_id", "=", envId)
        .execute(),
      db.selectFrom("domains").select(["hostname", "state"]).where("environment_id", "=", envId).execute(),
      db.selectFrom("jobs").select(["name", "spec"]).where("environment_id", "=", envId).execute(),
      db.selectFrom("releases").select(["name", "version", "digest"]).where("environment_id", "=", envId).execute(),
      db.selectFrom("progressive_rollouts").select(["command"]).where("environment_id", "=", envId).executeTakeFirst(),
      db.selectFrom("rollouts").select(["region", "rollback_to"]).where("environment_id", "=", envId).execute(),
      db
        .selectFrom("previews")
        .select(["state", "image", "expires_at", "approved_at", "with_secrets", "fork"])
        .where("environment_id", "=", envId)
        .executeTakeFirst(),
    ]);
  const map = <T>(rows: T[], key: (r: T) => string, value: (r: T) => ViewValue): ViewTree =>
    Object.fromEntries(rows.map((r) => [key(r), value(r)]));
  const pending = rollouts.filter((r) => r.rollback_to !== null);
  return {
    environment: {
      slug: e.slug,
      deleting: e.deleting_at !== null,
      revision: Number(e.last_revision),
      sentinel:
        e.sentinel_image === null
          ? null
          : {
              image: e.sentinel_image,
              replicas: Number(e.sentinel_replicas),
              cpu_millicores: Number(e.sentinel_cpu_millicores),
              memory_mib: Number(e.sentinel_memory_mib),
            },
      rollout: {
        strategy: e.strategy,
        max_surge: e.max_surge,
        max_unavailable: e.max_unavailable,
        min_ready_seconds: Number(e.min_ready_seconds),
        progress_deadline_seconds: Number(e.progress_deadline_seconds),
        revision_history_limit: Number(e.revision_history_limit),
        paused: Number(e.paused) === 1,
        warm_window_seconds: Number(e.warm_window_seconds),
        // The revision `krane rollback` pinned the environment to (absent: the newest runs).
        pinned: e.pinned_deployment_id,
        progressive: json(e.progressive),
        command: progressive?.command ?? null,
        undo:
          pending.length === 0
            ? null
            : map(
                pending,
                (r) => r.region,
                (r) => Number(r.rollback_to),
              ),
      },
      regions: map(
        regions,
        (r) => r.region,
        (r) => Number(r.replicas),
      ),
      // The edge policies in order (krane policy).
      edge_policies: json(e.edge_policies),
      config: map(
        config,
        (c) => c.key,
        (c) => c.value,
      ),
      // Never a value: where it comes from and when it was last set.
      secrets: map(
        secrets,
        (s) => s.key,
        (s) => new Sensitive(`${s.source}:${s.external_path ?? ""}:${Number(s.updated_at)}`),
      ),
      endpoints: map(
        endpoints,
        (p) => p.visibility,
        (p) => ({ hostname: p.hostname, path_prefix: p.path_prefix, auth: json(p.auth) }),
      ),
      domains: map(
        domains,
        (d) => d.hostname,
        (d) => d.state,
      ),
      jobs: map(
        jobs,
        (j) => j.name,
        (j) => json(j.spec),
      ),
      releases: map(
        releases,
        (r) => r.name,
        (r) => ({ version: Number(r.version), digest: r.digest }),
      ),
      preview: preview
        ? {
            state: preview.state,
            image: preview.image,
            expires_at: new Date(Number(preview.expires_at)).toISOString(),
            approved: preview.approved_at !== null,
            with_secrets: Number(preview.with_secrets) === 1,
            fork: Number(preview.fork) === 1,
          }
        : undefined,
    },
  };
}

async function environmentSubject(
  db: Reader,
  wsRef: string,
  projectRef: string,
  envRef: string,
): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const p = await projectRow(db, w.id, projectRef);
  if (!p) return { workspaceId: w.id, targets: [w.id], view: null };
  const e =
    envRef === ""
      ? undefined
      : await db
          .selectFrom("environments")
          .select("id")
          .where("project_id", "=", p.id)
          .where(envRef.startsWith("env_") ? "id" : "slug", "=", envRef)
          .executeTakeFirst();
  if (!e) return { workspaceId: w.id, targets: [w.id, p.id], view: null };
  return { workspaceId: w.id, targets: [w.id, p.id, e.id], view: await environmentView(db, e.id) };
}

async function deploymentRow(db: Reader, id: string | undefined) {
  if (id === undefined || id === "") return undefined;
  return db.selectFrom("deployments").selectAll().where("id", "=", id).executeTakeFirst();
}

/** A revision as it was created (it never changes after). */
function deploymentView(d: NonNullable<Awaited<ReturnType<typeof deploymentRow>>>): ViewTree {
  return {
    revision: Number(d.revision),
    image: d.image,
    command: parseJsonList<string>(d.command),
    args: parseJsonList<string>(d.args),
    port: Number(d.port),
    env: json(d.env),
    cpu_millicores: Number(d.cpu_millicores),
    memory_mib: Number(d.memory_mib),
    health_check: json(d.health_check),
    build_id: d.build_id,
  };
}

async function deploymentSubject(db: Reader, id: string | undefined): Promise<AuditSubject | undefined> {
  const d = await deploymentRow(db, id);
  if (!d) return undefined;
  return {
    workspaceId: d.workspace_id,
    targets: [d.workspace_id, d.project_id, d.environment_id, d.id],
    view: { deployment: deploymentView(d) },
  };
}

async function regionSubject(db: Reader, name: string): Promise<AuditSubject> {
  const r = await db.selectFrom("regions").select("name").where("name", "=", name).executeTakeFirst();
  return { workspaceId: INSTALLATION_CHAIN, targets: [name], view: r ? { region: { name: r.name } } : null };
}

async function clusterSubject(db: Reader, region: string, name: string): Promise<AuditSubject> {
  const c = await db
    .selectFrom("clusters")
    .select(["id", "region", "name", "token_hash"])
    .where("region", "=", region)
    .where("name", "=", name === "" ? "default" : name)
    .executeTakeFirst();
  if (!c) return { workspaceId: INSTALLATION_CHAIN, targets: [region], view: null };
  return {
    workspaceId: INSTALLATION_CHAIN,
    targets: [region, c.id],
    view: {
      cluster: {
        region: c.region,
        name: c.name,
        // The digest only tells a new token from the old one; it is never written to the log.
        token: new Sensitive(c.token_hash),
        token_revoked: clusterTokenRevoked(c),
      },
    },
  };
}

/**
 * An API token, by id (a name is unique only within its scope): the chain of its workspace, or
 * the installation's for an installation token.
 */
async function apiTokenSubject(db: Reader, id: string | undefined): Promise<AuditSubject> {
  const t =
    id === undefined || id === ""
      ? undefined
      : await db
          .selectFrom("api_tokens")
          .select(["id", "name", "workspace_id"])
          .where("id", "=", id)
          .executeTakeFirst();
  return {
    workspaceId: t?.workspace_id ?? INSTALLATION_CHAIN,
    targets: t ? [t.id] : id ? [id] : [],
    view: t ? { api_token: { name: t.name, workspace_id: t.workspace_id } } : null,
  };
}

/** A workspace member, by id (mem_…) or email address: their address and role. */
async function memberSubject(db: Reader, wsRef: string, ref: string | undefined): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const m =
    ref === undefined || ref === ""
      ? undefined
      : await db
          .selectFrom("members")
          .select(["id", "email", "granted_role", "group_role"])
          .where("workspace_id", "=", w.id)
          .where(ref.startsWith("mem_") ? "id" : "email", "=", ref.startsWith("mem_") ? ref : ref.trim().toLowerCase())
          .executeTakeFirst();
  return {
    workspaceId: w.id,
    targets: m ? [m.id] : ref ? [ref] : [],
    view: m
      ? { member: { email: m.email, role: higherRole(roleOrNull(m.granted_role), roleOrNull(m.group_role)) } }
      : null,
  };
}

/** A service account, by id (sa_…) or name: its name and role. */
async function serviceAccountSubject(
  db: Reader,
  wsRef: string,
  ref: string | undefined,
): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const a =
    ref === undefined || ref === ""
      ? undefined
      : await db
          .selectFrom("service_accounts")
          .select(["id", "name", "role"])
          .where("workspace_id", "=", w.id)
          .where(ref.startsWith("sa_") ? "id" : "name", "=", ref)
          .executeTakeFirst();
  return {
    workspaceId: w.id,
    targets: a ? [a.id] : ref ? [ref] : [],
    view: a ? { service_account: { name: a.name, role: a.role } } : null,
  };
}

/** A member's sign-in session, by id: whose it is and from which client (never its tokens). */
async function sessionSubject(db: Reader, wsRef: string, id: string): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  // An empty id matches no session: the event then names none.
  const s = await db
    .selectFrom("member_sessions as s")
    .innerJoin("members as m", "m.id", "s.member_id")
    .select(["s.client", "m.email"])
    .where("s.workspace_id", "=", w.id)
    .where("s.id", "=", id)
    .executeTakeFirst();
  return {
    workspaceId: w.id,
    targets: id === "" ? [] : [id],
    view: s ? { session: { client: s.client, member: s.email } } : null,
  };
}

/** A project's repository: where it is and its branch map; its credentials by when they were set. */
async function repositorySubject(db: Reader, wsRef: string, projectRef: string): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const p = await db
    .selectFrom("projects")
    .select("id")
    .where("workspace_id", "=", w.id)
    .where(projectRef.startsWith("prj_") ? "id" : "slug", "=", projectRef)
    .executeTakeFirst();
  const r = p
    ? await db.selectFrom("repositories").selectAll().where("project_id", "=", p.id).executeTakeFirst()
    : undefined;
  const set = (v: Uint8Array | null): Sensitive | null =>
    v === null ? null : new Sensitive(String(Number(r?.created_at)));
  return {
    workspaceId: w.id,
    targets: p ? (r ? [p.id, r.id] : [p.id]) : [],
    view: r
      ? {
          repository: {
            url: r.url,
            provider: r.provider,
            credential_kind: r.credential_kind,
            credential: set(r.credential_sealed),
            webhook_secret: set(r.webhook_secret_sealed),
            status_token: set(r.status_token_sealed),
            branches: JSON.parse(r.branches) as ViewValue,
          },
        }
      : null,
  };
}

/** A build: its environment, state and what it made (its log is not audited). */
async function buildSubject(db: Reader, wsRef: string, id: string | undefined): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const b =
    id === undefined || id === ""
      ? undefined
      : await db
          .selectFrom("builds")
          .select(["id", "project_id", "environment_id", "state", "source_digest", "deploy", "image_digest"])
          .where("workspace_id", "=", w.id)
          .where("id", "=", id)
          .executeTakeFirst();
  return {
    workspaceId: w.id,
    targets: b ? [b.project_id, b.environment_id, b.id] : id ? [id] : [],
    view: b
      ? {
          build: {
            state: b.state,
            source_digest: b.source_digest,
            deploy: Number(b.deploy) === 1,
            image_digest: b.image_digest,
          },
        }
      : null,
  };
}

/** A source archive being uploaded to a project: how many bytes ctrl holds of it. */
async function buildSourceSubject(
  db: Reader,
  wsRef: string,
  projectRef: string,
  digest: string,
): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const p = await db
    .selectFrom("projects")
    .select("id")
    .where("workspace_id", "=", w.id)
    .where(projectRef.startsWith("prj_") ? "id" : "slug", "=", projectRef)
    .executeTakeFirst();
  if (!p) return { workspaceId: w.id, targets: [], view: null };
  const held = await db
    .selectFrom("build_source_chunks")
    .select((eb) => eb.fn.countAll<number>().as("chunks"))
    .where("project_id", "=", p.id)
    .where("digest", "=", digest)
    .executeTakeFirst();
  const chunks = Number(held?.chunks ?? 0);
  return { workspaceId: w.id, targets: [p.id], view: chunks > 0 ? { source: { digest, chunks } } : null };
}

function roleOrNull(v: string | null): RoleName | null {
  return v !== null && isRoleName(v) ? v : null;
}

async function previewHookSubject(
  db: Reader,
  wsRef: string,
  id: string | undefined,
): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const h =
    id === undefined || id === ""
      ? undefined
      : await db
          .selectFrom("preview_hooks")
          .selectAll()
          .where("id", "=", id)
          .where("workspace_id", "=", w.id)
          .executeTakeFirst();
  if (!h) return { workspaceId: w.id, targets: id ? [w.id, id] : [w.id], view: null };
  return {
    workspaceId: w.id,
    targets: [w.id, h.project_id, h.base_environment_id, h.id],
    view: {
      preview_hook: {
        provider: h.provider,
        repository: h.repository,
        image_template: h.image_template,
        region: h.region,
        ttl_seconds: Math.round(Number(h.ttl_ms) / 1000),
        with_secrets: Number(h.with_secrets) === 1,
        status_api_url: h.status_api_url,
        secret: new Sensitive(String(h.created_at)),
        status_token: new Sensitive(String(h.created_at)),
      },
    },
  };
}

async function notificationChannelSubject(db: Reader, wsRef: string, name: string): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  const c =
    name === ""
      ? undefined
      : await db
          .selectFrom("notification_channels")
          .select(["id", "type", "target", "events", "environments", "created_at"])
          .where("workspace_id", "=", w.id)
          .where("name", "=", name)
          .executeTakeFirst();
  if (!c) return { workspaceId: w.id, targets: [w.id], view: null };
  return {
    workspaceId: w.id,
    targets: [w.id, c.id],
    view: {
      notification_channel: {
        type: c.type,
        target: c.target,
        events: json(c.events),
        environments: json(c.environments),
        // The URL and key themselves are never shown: only that they were set, and when.
        credentials: c.type === "email" ? null : new Sensitive(String(c.created_at)),
      },
    },
  };
}

/** An environment's alert rule: its condition (its evaluation state is not configuration). */
async function alertRuleSubject(
  db: Reader,
  wsRef: string,
  projectRef: string,
  envRef: string,
  name: string,
): Promise<AuditSubject | undefined> {
  const e = await environmentSubject(db, wsRef, projectRef, envRef);
  if (!e) return undefined;
  const envId = e.targets[2];
  const r =
    envId === undefined || name === ""
      ? undefined
      : await db
          .selectFrom("alert_rules")
          .select(["id", "metric", "op", "threshold", "for_ms", "window_ms"])
          .where("environment_id", "=", envId)
          .where("name", "=", name)
          .executeTakeFirst();
  if (!r) return { workspaceId: e.workspaceId, targets: e.targets, view: null };
  return {
    workspaceId: e.workspaceId,
    targets: [...e.targets, r.id],
    view: {
      alert_rule: {
        metric: r.metric,
        op: r.op,
        threshold: Number(r.threshold),
        for_seconds: Number(r.for_ms) / 1000,
        window_seconds: Number(r.window_ms) / 1000,
      },
    },
  };
}

/** An environment's API key: its name, limits, metadata and revocation (never the key nor its digest). */
async function apiKeySubject(
  db: Reader,
  req: RequestFields,
  id: string | undefined,
): Promise<AuditSubject | undefined> {
  const e = await environmentSubject(db, field(req, "workspace"), field(req, "project"), field(req, "environment"));
  if (!e) return undefined;
  const envId = e.targets[2];
  const k =
    envId === undefined || id === undefined
      ? undefined
      : await db
          .selectFrom("api_keys")
          .select(["id", "name", "expires_at", "rate_limit", "rate_window_seconds", "metadata", "revoked_at"])
          .where("environment_id", "=", envId)
          .where("id", "=", id)
          .executeTakeFirst();
  if (!k) return { workspaceId: e.workspaceId, targets: e.targets, view: null };
  const n = (v: number | null): number | null => (v === null ? null : Number(v));
  return {
    workspaceId: e.workspaceId,
    targets: [...e.targets, k.id],
    view: {
      api_key: {
        name: k.name,
        expires_at: n(k.expires_at),
        rate_limit: n(k.rate_limit),
        rate_window_seconds: n(k.rate_window_seconds),
        metadata: JSON.parse(k.metadata) as Record<string, string>,
        revoked_at: n(k.revoked_at),
      },
    },
  };
}

async function smtpServerSubject(db: Reader): Promise<AuditSubject> {
  const s = await db.selectFrom("smtp_settings").selectAll().executeTakeFirst();
  return {
    workspaceId: INSTALLATION_CHAIN,
    targets: ["smtp"],
    view: s
      ? {
          smtp_server: {
            host: s.host,
            port: Number(s.port),
            security: s.security,
            username: s.username,
            password: s.password_sealed === null ? null : new Sensitive(String(s.updated_at)),
            from: s.from_address,
          },
        }
      : null,
  };
}

/** A workspace-wide setting, in the workspace's chain; its view is null while it is not set. */
async function workspaceSettingSubject(
  db: Reader,
  wsRef: string,
  view: (workspaceId: string) => Promise<ViewTree | null>,
): Promise<AuditSubject | undefined> {
  const w = await workspaceRow(db, wsRef);
  if (!w) return undefined;
  return { workspaceId: w.id, targets: [w.id], view: await view(w.id) };
}

function previewLimitsSubject(db: Reader, wsRef: string): Promise<AuditSubject | undefined> {
  return workspaceSettingSubject(db, wsRef, async (id) => {
    const l = await db.selectFrom("preview_limits").selectAll().where("workspace_id", "=", id).executeTakeFirst();
    return l ? { preview_limits: { fork_approval: Number(l.fork_approval) === 1 } } : null;
  });
}

/** Its own retention in days (not set: the default). */
function logRetentionSubject(db: Reader, wsRef: string): Promise<AuditSubject | undefined> {
  return workspaceSettingSubject(db, wsRef, async (id) => {
    const r = await db
      .selectFrom("log_retention")
      .select("retention_ms")
      .where("workspace_id", "=", id)
      .executeTakeFirst();
    return r ? { log_retention: { days: Number(r.retention_ms) / 86_400_000 } } : null;
  });
}

/**
 * Reads what a call is about, as of now in `db` (the change's transaction). `created` is what the
 * call's transaction said it created (noteWriteSubject), when it said.
 */
export type SubjectReader = (
  db: Reader,
  req: RequestFields,
  created: string | undefined,
) => Promise<AuditSubject | undefined>;

const env: SubjectReader = (db, req) =>
  environmentSubject(db, field(req, "workspace"), field(req, "project"), field(req, "environment"));

/**
 * A new revision of an environment: the environment (its revision counter, the replicas a deploy
 * may set) and the revision the call created, read the same way before and after, so the diff is
 * what the call changed (`deployment.*` added, `environment.revision` set, …), not two different
 * things compared.
 */
const deploymentCreation: SubjectReader = async (db, req, created) => {
  const e = await env(db, req, created);
  if (e === undefined || e.view === null) return e;
  const d = await deploymentRow(db, created);
  return { ...e, view: { ...e.view, deployment: d ? deploymentView(d) : null } };
};

/** A request field by its proto name ("cluster_name"), as protobuf-es names it ("clusterName"). */
function protoField(req: RequestFields, protoName: string): string {
  return field(
    req,
    protoName.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()),
  );
}

/** The id a call created, else the one its request names in `protoName`. */
function createdOr(req: RequestFields, created: string | undefined, protoName: string): string | undefined {
  return created ?? (protoField(req, protoName) || undefined);
}

/**
 * The view of a call that changes state, from its method's declared audit subject and field
 * (proto/krane/ctrl/v1/policy.proto); undefined for reads and undeclared methods (audited with
 * their workspace and no diff).
 */
export function subjectReader(method: DescMethod): SubjectReader | undefined {
  const p = policyOf(method);
  if (!p) return undefined;
  const named = (usual: string) => (req: RequestFields) => protoField(req, p.auditField || usual);
  switch (p.audit) {
    case Declared.WORKSPACE:
      return (db, req) => workspaceSubject(db, named("workspace")(req));
    case Declared.PROJECT:
      return (db, req) => projectSubject(db, field(req, "workspace"), named("project")(req));
    case Declared.ENVIRONMENT:
      return (db, req) =>
        environmentSubject(db, field(req, "workspace"), field(req, "project"), named("environment")(req));
    case Declared.NEW_REVISION:
      return deploymentCreation;
    case Declared.DEPLOYMENT:
      return (db, req) => deploymentSubject(db, named("deployment_id")(req));
    case Declared.REGION:
      return (db, req) => regionSubject(db, named("name")(req));
    case Declared.CLUSTER:
      return (db, req) => clusterSubject(db, field(req, "region"), named("cluster_name")(req));
    case Declared.API_TOKEN:
      return (db, req, created) => apiTokenSubject(db, createdOr(req, created, p.auditField || "token_id"));
    case Declared.LOG_RETENTION:
      return (db, req) => logRetentionSubject(db, named("workspace")(req));
    case Declared.PREVIEW_LIMITS:
      return (db, req) => previewLimitsSubject(db, named("workspace")(req));
    case Declared.MEMBER:
      return (db, req, created) =>
        memberSubject(db, field(req, "workspace"), createdOr(req, created, p.auditField || "member"));
    case Declared.SERVICE_ACCOUNT:
      return (db, req, created) =>
        serviceAccountSubject(db, field(req, "workspace"), createdOr(req, created, p.auditField || "name"));
    case Declared.PREVIEW_HOOK:
      return (db, req, created) =>
        previewHookSubject(db, field(req, "workspace"), createdOr(req, created, p.auditField || "hook_id"));
    case Declared.NOTIFICATION_CHANNEL:
      return (db, req) => notificationChannelSubject(db, field(req, "workspace"), named("name")(req));
    case Declared.ALERT_RULE:
      return (db, req) =>
        alertRuleSubject(
          db,
          field(req, "workspace"),
          field(req, "project"),
          field(req, "environment"),
          named("name")(req),
        );
    case Declared.API_KEY:
      return (db, req, created) => apiKeySubject(db, req, createdOr(req, created, p.auditField || "key_id"));
    case Declared.SMTP_SERVER:
      return (db) => smtpServerSubject(db);
    case Declared.BUILD:
      return (db, req, created) =>
        buildSubject(db, field(req, "workspace"), createdOr(req, created, p.auditField || "build_id"));
    case Declared.SESSION:
      return (db, req) => sessionSubject(db, field(req, "workspace"), named("id")(req));
    case Declared.REPOSITORY:
      return (db, req) => repositorySubject(db, field(req, "workspace"), field(req, "project"));
    case Declared.BUILD_SOURCE:
      return (db, req) => buildSourceSubject(db, field(req, "workspace"), field(req, "project"), named("digest")(req));
    default:
      return undefined;
  }
}

/** An environment's view by id (the preview webhooks and TTL, which have no request to read). */
export async function environmentSubjectById(db: Reader, envId: string): Promise<AuditSubject | undefined> {
  const e = await db
    .selectFrom("environments")
    .select(["workspace_id", "project_id", "id"])
    .where("id", "=", envId)
    .executeTakeFirst();
  if (!e) return undefined;
  return {
    workspaceId: e.workspace_id,
    targets: [e.workspace_id, e.project_id, e.id],
    view: await environmentView(db, e.id),
  };
}
