// Table shapes of ctrl's database, shared by the SQLite and PostgreSQL dialects (the rollout
// driver's tables included). Migrations (./migrations) create them; nothing else defines tables.
//
// Conventions that keep one set of queries valid on both databases:
//   - timestamps are integer unix milliseconds, booleans are 0/1 integers;
//   - lists and small records are JSON text;
//   - protobuf payloads are binary (BLOB / BYTEA);
//   - 64-bit integers are read back as JS numbers (the PostgreSQL pool parses INT8 as Number;
//     versions stay far below 2^53), and become bigint only at the protobuf boundary.
import type { ColumnType, Insertable, Selectable } from "kysely";
import type { AppProtocol } from "../../contracts/protocols.js";

/**
 * The name of a kind of object streamed to agents ("deployment", "sentinel"): each kind has its
 * own stream and version sequence per region. The database layer treats it as an opaque name;
 * the kinds are registered in ../kinds/registry.ts.
 */
export type KindName = string;

export type ChangeOp = "apply" | "delete";

export interface WorkspacesTable {
  id: string;
  slug: string;
  name: string;
  k8s_namespace: string;
  created_at: number;
  /** Migration 0009: when its deletion was requested; null while it lives. */
  deleting_at: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface ProjectsTable {
  id: string;
  workspace_id: string;
  slug: string;
  name: string;
  created_at: number;
  /** Migration 0009: when its deletion was requested; null while it lives. */
  deleting_at: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface EnvironmentsTable {
  id: string;
  workspace_id: string;
  project_id: string;
  slug: string;
  /** null when the environment has no sentinels; "" for krane's own sentinel (the agent's image). */
  sentinel_image: string | null;
  sentinel_replicas: number;
  sentinel_cpu_millicores: number;
  sentinel_memory_mib: number;
  /** Rollout policy, stored for the rollout engine. */
  strategy: string;
  max_surge: string;
  max_unavailable: string;
  min_ready_seconds: number;
  progress_deadline_seconds: number;
  revision_history_limit: number;
  paused: number;
  /** Highest revision handed out; the next deployment gets last_revision + 1. */
  last_revision: number;
  created_at: number;
  updated_at: number;
  /** Migration 0008: the edge auth section of the sentinel's routing policy (JSON), null: none. */
  edge_auth: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0035: the ordered edge policies (JSON list, src/contracts/edge-policy.ts), null: none. */
  edge_policies: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0044: the API keys its sentinels carry (src/contracts/api-keys.ts JSON), null: none. */
  edge_api_keys: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0007: grows with every change of the routing policy. */
  routing_version: ColumnType<number, number | undefined, number>;
  /** Migration 0009: when its deletion was requested; null while it lives. */
  deleting_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** Migration 0011: the progressive strategy (JSON ProgressiveSpec), null: rolling/recreate only. */
  progressive: ColumnType<string | null, string | null | undefined, string | null>;
  /**
   * Migration 0011 (the one place routing lives since 0015): the weights and preview revision per
   * region (JSON RegionRouting by region, ../payloads/sentinel.ts); a region without an entry, or
   * null, routes every running instance an equal share.
   */
  routing_regions: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0025: the autoscaling policy (JSON AutoscalePolicy, src/contracts/autoscaling.ts), null: none. */
  autoscale: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0029: how long the previous revision stays warm after a rollout (0: not at all). */
  warm_window_seconds: ColumnType<number, number | undefined, number>;
  /** Migration 0029: the revision `krane rollback` pinned every region to (null: the newest). */
  pinned_deployment_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Migration 0025: what a region's agent last decided for an environment's replica count. */
export interface AutoscaleStatusTable {
  environment_id: string;
  region: string;
  replicas: number;
  reason: string;
  /** When the agent decided (its clock, unix ms). */
  decided_at: number;
  /** When ctrl recorded it (unix ms). */
  reported_at: number;
}

/** Migration 0011: the state of an environment's progressive rollout. */
export interface ProgressiveRolloutsTable {
  environment_id: string;
  /** JSON ProgressiveState (src/rollout/progressive). */
  state: string;
  /** A pending "promote" or "abort", consumed by the next decision. */
  command: string | null;
  /** When to decide again (unix ms), or null. */
  wake_at: number | null;
  updated_at: number;
}

export interface EnvironmentRegionsTable {
  environment_id: string;
  region: string;
  replicas: number;
  /** Migration 0025: the region's own autoscaling policy (JSON), "off", or null: the environment's. */
  autoscale: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface DeploymentsTable {
  id: string;
  workspace_id: string;
  project_id: string;
  environment_id: string;
  revision: number;
  k8s_name: string;
  image: string;
  command: string;
  args: string;
  port: number;
  env: string;
  cpu_millicores: number;
  memory_mib: number;
  health_check: string | null;
  build_id: string;
  created_at: number;
  /** Migration 0009: the revision's configuration, a JSON list of {name, value}; null: none. */
  config: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0009: the revision's secrets, one AES-256-GCM ciphertext of a JSON map; null: none. */
  secrets: ColumnType<Uint8Array | null, Uint8Array | null | undefined, Uint8Array | null>;
  /** Migration 0009: the keys of `secrets` (JSON list), so rendering needs no decryption. */
  secret_keys: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0009: a keyed digest of the secrets' content, part of the Secret's name. */
  secrets_digest: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0009: external secret references, a JSON list of {key, path}; null: none. */
  external_secrets: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0024: what the app speaks on its port (APP_PROTOCOLS). */
  protocol: ColumnType<AppProtocol, AppProtocol | undefined, AppProtocol>;
  /** Migration 0028: the digest `image` was resolved to at deploy ("sha256:…"); pods run image@digest. Null: as named. */
  image_digest: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface SentinelsTable {
  id: string;
  workspace_id: string;
  project_id: string;
  environment_id: string;
  region: string;
  k8s_name: string;
  health: string;
  available_replicas: number;
  rejected_reason: string | null;
  reported_at: number | null;
  /** Migration 0007: the sentinel Service's in-cluster address (host:port), as reported. */
  address: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0007: the routing policy version every pod of the sentinel serves, as reported. */
  served_routing_version: ColumnType<number | null, number | null | undefined, number | null>;
}

/** What each region should run right now, one row per object; the snapshot is read from here. */
export interface DesiredObjectsTable {
  region: string;
  kind: KindName;
  object_id: string;
  /** The encoded Apply message, rendered from the rows it describes when they change. */
  payload: Uint8Array;
  /**
   * Migration 0006: the desired replica count of the object in the region, the source of truth
   * for kinds sized per region (deployments: set by the rollout driver); null for kinds whose
   * replicas are not per region (sentinels: environments.sentinel_replicas).
   */
  replicas: ColumnType<number | null, number | null | undefined, number | null>;
  /**
   * Migration 0009: the environment the object belongs to (deleting an environment finds every
   * kind's objects by it); null for rows written without one.
   */
  environment_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Every change to desired_objects, versioned per (region, kind); streams read from here. */
export interface OutboxTable {
  region: string;
  kind: KindName;
  version: number;
  object_id: string;
  op: ChangeOp;
  payload: Uint8Array;
  created_at: number;
}

/** The version counter of each stream and how far its outbox has been compacted. */
export interface StreamVersionsTable {
  region: string;
  kind: KindName;
  version: number;
  compacted_through: number;
}

export interface RegionsTable {
  name: string;
  created_at: number;
}

export interface ClustersTable {
  id: string;
  region: string;
  name: string;
  token_hash: string;
  created_at: number;
  last_heartbeat_at: number | null;
  agent_id: string;
  build: string;
  deployments_version: number;
  sentinels_version: number;
}

export interface ApiTokensTable {
  id: string;
  name: string;
  token_hash: string;
  created_at: number;
  /** Migration 0004: unix ms of the last recorded use, at most once a minute; null if never. */
  last_used_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** Migration 0027: the workspace the token is bound to; null for an installation token. */
  workspace_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0031: the member who owns a workspace token (else its service account does). */
  member_id: ColumnType<string | null, string | null | undefined, string | null>;
  service_account_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Migration 0031: a workspace's people (domain/members.ts). Roles by name; null: none. */
export interface MembersTable {
  id: string;
  workspace_id: string;
  /** Lower case. */
  email: string;
  name: string;
  granted_role: string | null;
  group_role: string | null;
  /** "<issuer>#<sub>"; null until the first sign-in. */
  subject: string | null;
  created_at: number;
  joined_at: number | null;
}

/** Migration 0031: named owners of a workspace's CI tokens (domain/members.ts). */
export interface ServiceAccountsTable {
  id: string;
  workspace_id: string;
  name: string;
  role: string;
  created_at: number;
}

/** Migration 0026: the dashboard's sign-in sessions (digests of the cookie's id). */
export interface DashboardSessionsTable {
  session_hash: string;
  token_id: string;
  created_at: number;
  expires_at: number;
}

/** Migration 0033: a sign-in through the OpenID provider under way (by its state's digest). */
export interface OidcLoginsTable {
  state_hash: string;
  nonce: string;
  code_verifier: string;
  redirect_uri: string;
  /** The workspace (slug) the sign-in is for; "" for the member's only one. */
  workspace: string;
  created_at: number;
  expires_at: number;
}

/** Migration 0033: a member's session from a sign-in (digests of its access and refresh tokens). */
export interface MemberSessionsTable {
  id: string;
  member_id: string;
  workspace_id: string;
  /** The provider's "<issuer>#<sub>" it was made for. */
  subject: string;
  /** "cli" or "dashboard". */
  client: string;
  access_hash: string;
  access_expires_at: number;
  refresh_hash: string;
  /** The session ends then, refreshed or not. */
  expires_at: number;
  created_at: number;
  refreshed_at: number;
  /** The address it was made or last refreshed from, as ctrl saw it (migration 0038). */
  ip: string;
}

/** Migration 0005: digests of revoked user tokens, never registered again. */
export interface RevokedTokensTable {
  token_hash: string;
  revoked_at: number;
}

/** Migration 0010_a: the Idempotency-Key of each call that changed something (server/idempotency.ts). */
export interface IdempotencyKeysTable {
  /** Whose key: the caller (e.g. "user:tok_…"). */
  scope: string;
  /** "Service/Method". */
  method: string;
  idempotency_key: string;
  /** SHA-256 of the encoded request: a different request under the same key is refused. */
  request_digest: string;
  created_at: number;
  /** The ctrl process that claimed the key (a random id per process start). */
  owner: string;
  /** The encrypted answer; null until the call answered (or when it never could). */
  answer: ColumnType<Uint8Array | null, Uint8Array | null | undefined, Uint8Array | null>;
  answered_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** Migration 0014: what the call created (a deployment id), written with the change. */
  subject: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Migration 0010_b: each stream's cursor as the cluster's agent last reported it. */
export interface ClusterCursorsTable {
  cluster_id: string;
  kind: string;
  version: number;
  reported_at: number;
}

export interface InstancesTable {
  deployment_id: string;
  region: string;
  k8s_name: string;
  address: string;
  status: string;
  cpu_millicores: number;
  memory_mib: number;
  node_name: string;
  zone: string;
  ready_since: number;
  reported_at: number;
}

/** Per (deployment, region) facts reported by agents that are not instances. */
export interface DeploymentReportsTable {
  deployment_id: string;
  region: string;
  rejected_reason: string | null;
  reported_at: number;
}

// ---------------------------------------------------------------- the rollout driver's state
// (migration 0002_rollouts): per environment and region, the Deployment-like record the engine
// works on; per revision and region, the ReplicaSet-like record; and recent rollout events.

/** One row per (environment, region): what Kubernetes keeps on the Deployment object. */
export interface RolloutsTable {
  environment_id: string;
  region: string;
  /** The revision the region should run (Kubernetes' new ReplicaSet); null until the first pass. */
  target_deployment_id: string | null;
  /** The environment's last_revision when the target was chosen: a newer deployment retargets. */
  target_seen_revision: number;
  /** Pending undo: null, 0 (previous revision) or a region revision number. */
  rollback_to: number | null;
  /** JSON of the engine's DeploymentStatus. */
  status: string;
  /** JSON of the engine's Condition[]. */
  conditions: string;
  /** The spec the last pass saw (see specKey); differs from the current one until observed. */
  observed_spec: string;
  /** When a pass must run even without events (progress deadline, minReadySeconds); null: none. */
  requeue_at: number | null;
  updated_at: number;
  /** Migration 0029: the revision kept warm in the region (null: none; ../rollout/warm.ts). */
  warm_deployment_id: string | null;
  /** Migration 0029: the warm revision's size as the rollout engine counts it (its pods beyond it are kept). */
  warm_replicas: number;
  /** Migration 0029: when the warm revision goes (unix ms); null while the rollout that left it is under way. */
  warm_until: number | null;
}

/** One row per (deployment, region) once the engine has sized the revision there. */
export interface RolloutRevisionsTable {
  deployment_id: string;
  environment_id: string;
  region: string;
  /** The region's revision number (renumbered on rollback, like the ReplicaSet annotation). */
  revision: number | null;
  // Its size is desired_objects.replicas (migration 0006 dropped the copy that was kept here).
  desired_replicas: number | null;
  max_replicas: number | null;
}

export interface RolloutEventsTable {
  environment_id: string;
  region: string;
  seq: number;
  at: number;
  type: string;
  reason: string;
  message: string;
}

// ---------------------------------------------------------------- migration 0009: configuration,
// secrets, releases, jobs and deletion

/** The plain configuration new revisions of an environment get. */
export interface EnvironmentConfigTable {
  environment_id: string;
  key: string;
  value: string;
  updated_at: number;
}

/** The secrets new revisions get: a value's ciphertext (never the value) or an external path. */
export interface EnvironmentSecretsTable {
  environment_id: string;
  key: string;
  /** "value" or "external". */
  source: string;
  ciphertext: Uint8Array | null;
  external_path: string | null;
  updated_at: number;
}

/** An environment's data key, wrapped by the master key `master_key_id`. */
export interface DataKeysTable {
  id: string;
  environment_id: string;
  wrapped: Uint8Array;
  master_key_id: string;
  created_at: number;
  rotated_at: number | null;
}

/** Migration 0028: a workspace's credential for one registry host (the password sealed). */
export interface RegistryCredentialsTable {
  id: string;
  workspace_id: string;
  /** Canonical host (src/contracts/images.ts registryHost): "ghcr.io", "10.0.0.1:5000", "docker.io". */
  host: string;
  username: string;
  /** The password (or token), sealed with `wrapped_key`'s key; associated data names the row. */
  sealed_password: Uint8Array;
  /** The credential's own data key, wrapped by the master key `master_key_id`. */
  wrapped_key: Uint8Array;
  master_key_id: string;
  created_at: number;
  updated_at: number;
}

export interface ReleasesTable {
  id: string;
  workspace_id: string;
  project_id: string;
  environment_id: string;
  name: string;
  version: number;
  /** sha256 of the current version's objects: an identical apply makes no new version. */
  digest: string;
  created_at: number;
  updated_at: number;
}

/** The objects of a release's current version, in order. */
export interface ReleaseObjectsTable {
  release_id: string;
  object_id: string;
  seq: number;
  api_group: string;
  api_version: string;
  kind: string;
  name: string;
  /** JSON, krane's labels added; a sealed Secret's data removed. */
  manifest: string;
  /** A Secret's data (JSON map of base64 values), encrypted; null for other objects. */
  sealed: Uint8Array | null;
}

/** Every kind a release ever had. */
export interface ReleaseKindsTable {
  release_id: string;
  api_group: string;
  api_version: string;
  kind: string;
}

export interface ReleaseStatusTable {
  release_id: string;
  region: string;
  observed_version: number;
  /** JSON list of the reported object statuses. */
  objects: string;
  rejected_reason: string | null;
  reported_at: number;
}

export interface JobsTable {
  id: string;
  workspace_id: string;
  project_id: string;
  environment_id: string;
  name: string;
  k8s_name: string;
  /** JSON of the validated job spec. */
  spec: string;
  created_at: number;
  updated_at: number;
}

export interface JobStatusTable {
  job_id: string;
  region: string;
  /** JSON list of runs, newest first. */
  runs: string;
  last_schedule: number;
  rejected_reason: string | null;
  reported_at: number;
}

/** A deletion in progress (an environment, project or workspace id). */
export interface DeletionsTable {
  id: string;
  scope: string;
  requested_at: number;
  /** JSON list of regions an operator forced past ("*": all). */
  forced_regions: string;
}

/** An object whose deletion a region's agent has not confirmed yet. */
export interface PendingDeletionsTable {
  environment_id: string;
  region: string;
  kind: KindName;
  object_id: string;
  requested_at: number;
}

// ---------------------------------------------------------------- audit (migration 0020_audit_events)

/** One event of a hash chain (src/contracts/audit.ts says what each field means). */
export interface AuditEventsTable {
  id: string;
  /** "" for the installation's chain. */
  workspace_id: string;
  seq: number;
  at: number;
  actor_kind: string;
  actor_id: string;
  actor_name: string;
  method: string;
  /** JSON list of ids. */
  targets: string;
  request_id: string;
  client_ip: string;
  user_agent: string;
  idempotency_key: string;
  code: string;
  message: string;
  /** JSON list of AuditChange. */
  changes: string;
  prev_hash: string;
  hash: string;
  /** Migration 0027: a user token's scope ("installation" or a workspace id); null otherwise. */
  actor_scope: ColumnType<string | null, string | null | undefined, string | null>;
  /** Migration 0031: a workspace token's owner when it acted; null: none. */
  actor_owner: ColumnType<string | null, string | null | undefined, string | null>;
}

/** The head of a chain, and the anchor retention left. */
export interface AuditChainsTable {
  workspace_id: string;
  seq: number;
  hash: string;
  pruned_through_seq: number;
  pruned_through_hash: string;
  updated_at: number;
}

/** Per sink and chain, the last event delivered. */
export interface AuditSinkCursorsTable {
  sink: string;
  workspace_id: string;
  seq: number;
}

/** The ctrl replica delivering a sink, until expires_at. */
export interface AuditSinkLeasesTable {
  sink: string;
  owner: string;
  expires_at: number;
}

// ---------------------------------------------------------------- previews (migration 0021_previews)

/** A preview environment (../domain/previews.ts). */
export interface PreviewsTable {
  id: string;
  workspace_id: string;
  project_id: string;
  base_environment_id: string;
  /** The environment it runs as; null while a fork's preview waits for approval. */
  environment_id: string | null;
  /** The environment's slug. */
  name: string;
  /** "cli", "github" or "gitlab". */
  source: string;
  hook_id: string | null;
  /** The pull request's repository, number and head commit ("" and 0 from the CLI). */
  repository: string;
  pr_number: number;
  head_sha: string;
  fork: number;
  with_secrets: number;
  image: string;
  region: string;
  /** What it runs, counted against the workspace's limits (one replica and one sentinel). */
  cpu_millicores: number;
  memory_mib: number;
  ttl_ms: number;
  expires_at: number;
  /** "awaiting_approval", "active" or "deleting". */
  state: string;
  approved_at: number | null;
  /** The last commit status reported to the pull request (JSON), "" for none. */
  status_reported: string;
  /** When the status reporter should look at it again; null: nothing to report. */
  status_due_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface PreviewLimitsTable {
  workspace_id: string;
  max_previews: number;
  max_cpu_millicores: number;
  max_memory_mib: number;
  fork_approval: number;
  updated_at: number;
}

/**
 * Migration 0034: a workspace's quotas (workspace_id "*": the installation's defaults). Per quota
 * null = the default, -1 = unlimited, else the limit.
 */
export interface WorkspaceQuotasTable {
  workspace_id: string;
  cpu_millicores: number | null;
  memory_mib: number | null;
  instances: number | null;
  environments: number | null;
  previews: number | null;
  build_minutes: number | null;
  updated_at: number;
}

/** A pull-request webhook of a project's environment. */
export interface PreviewHooksTable {
  id: string;
  workspace_id: string;
  project_id: string;
  base_environment_id: string;
  /** "github" or "gitlab". */
  provider: string;
  /** GitHub "owner/name"; GitLab the project's path or numeric id. */
  repository: string;
  /** How deliveries are verified: "hmac-sha256" (GitHub), "signing-token" or "secret-token" (GitLab). */
  verification: string;
  /** The webhook secret, sealed with the base environment's data key. */
  secret_sealed: Uint8Array;
  /** The commit-status API token, sealed likewise; null: no status is reported. */
  status_token_sealed: Uint8Array | null;
  status_api_url: string;
  /** The preview's image: `{sha}`, `{short_sha}`, `{pr}` and `{branch}` are filled in. */
  image_template: string;
  /** "" : the base environment's first region. */
  region: string;
  ttl_ms: number;
  with_secrets: number;
  created_at: number;
}

/** A delivery a hook accepted (replay protection). */
export interface WebhookDeliveriesTable {
  hook_id: string;
  delivery_id: string;
  received_at: number;
}

// ---------------------------------------------------------------- exposure (migration 0008_exposure)

/** An environment's endpoint of one visibility. */
export interface EndpointsTable {
  id: string;
  environment_id: string;
  workspace_id: string;
  project_id: string;
  /** "public" or "organization". */
  visibility: string;
  hostname: string;
  /** "/" on a host of its own; the prefix on a shared host. */
  path_prefix: string;
  /** JSON of the endpoint's JWT settings (EndpointAuthSettings), null: none. */
  auth: string | null;
  created_at: number;
  updated_at: number;
}

/** A custom domain claimed by an environment; routed only while verified. */
export interface DomainsTable {
  id: string;
  environment_id: string;
  workspace_id: string;
  project_id: string;
  hostname: string;
  /** The secret part of the TXT record's value. */
  token: string;
  /** "pending", "verified" or "failed". */
  state: string;
  last_error: string | null;
  last_checked_at: number | null;
  verified_at: number | null;
  /** A verified domain whose record went missing: since when (it stays routed for a grace period). */
  lost_since: number | null;
  next_check_at: number;
  created_at: number;
}

/** The last gateway report of an environment's exposure in a region. */
export interface GatewayReportsTable {
  environment_id: string;
  region: string;
  /** JSON of the reported routes (GatewayRouteStatus as JSON). */
  routes: string;
  rejected_reason: string | null;
  reported_at: number;
}

/** Migration 0012: one revision's responses in one region during one reported window. */
export interface MeasurementsTable {
  environment_id: string;
  deployment_id: string;
  region: string;
  from_ms: number;
  to_ms: number;
  r2xx: number;
  r3xx: number;
  r4xx: number;
  r5xx: number;
  /** JSON list of non-cumulative latency observations (LATENCY_BUCKETS_MS then +Inf). */
  latency: string;
  received_at: number;
}

/** Migration 0041: one line an instance wrote, masked (logs/history.ts). */
export interface LogLinesTable {
  environment_id: string;
  region: string;
  instance: string;
  /** The kubelet's time stamp, unix ns as 19 digits (sorts as text; too big for a double). */
  time_ns: string;
  workspace_id: string;
  deployment_id: string;
  revision: number;
  /** "stdout" or "stderr"; "" when not known (pods/log gave both merged). */
  stream: string;
  line: string;
}

/** Migration 0041: a workspace's log retention (absent: the default). */
export interface LogRetentionTable {
  workspace_id: string;
  retention_ms: number;
  updated_at: number;
}

/** Migration 0048: the ctrl replica that archives an environment's lines, until expires_at (logs/lease.ts). */
export interface LogArchiveLeasesTable {
  environment_id: string;
  holder: string;
  expires_at: number;
}

/** Migration 0036: one series' figures over one minute or hour (domain/metric-history.ts). */
export interface MetricPointsTable {
  environment_id: string;
  deployment_id: string;
  region: string;
  /** "" for the revision as its sentinels count it. */
  instance: string;
  /** 60000 or 3600000. */
  step_ms: number;
  at_ms: number;
  requests: number;
  errors: number;
  /** Non-cumulative latency observations per bucket (LATENCY_BUCKETS_MS, then +Inf). */
  l00: number;
  l01: number;
  l02: number;
  l03: number;
  l04: number;
  l05: number;
  l06: number;
  l07: number;
  l08: number;
  l09: number;
  l10: number;
  l11: number;
  l12: number;
  l13: number;
  l14: number;
  cpu_millicores_sum: number;
  memory_bytes_sum: number;
  usage_samples: number;
  restarts: number;
}

/** Migration 0044: an environment's API key, by its SHA-256 only (domain/api-keys.ts). */
export interface ApiKeysTable {
  id: string;
  workspace_id: string;
  environment_id: string;
  name: string;
  /** SHA-256 of the key, lowercase hex. */
  digest: string;
  /** The key's last 4 characters. */
  hint: string;
  expires_at: number | null;
  rate_limit: number | null;
  rate_window_seconds: number | null;
  /** Flat string map as JSON. */
  metadata: string;
  created_by: string;
  created_at: number;
  revoked_at: number | null;
}

/** Migration 0042: an environment's alert rule and its evaluation state (domain/alerts.ts). */
export interface AlertRulesTable {
  id: string;
  workspace_id: string;
  environment_id: string;
  name: string;
  /** An AlertMetric (alerts/evaluate.ts). */
  metric: string;
  /** ">" or "<". */
  op: string;
  threshold: number;
  for_ms: number;
  /** The span each minute's value covers, ending with it (migration 0046; one minute before). */
  window_ms: number;
  /** "inactive", "pending" or "firing". */
  phase: string;
  since_ms: number;
  gap_run: number;
  /** 1: the last minute with data held the condition. */
  last_held: number;
  last_value: number | null;
  /** The start of the first minute not evaluated yet. */
  next_minute_ms: number;
  created_at: number;
}

/** Migration 0022: one lifecycle fact of an instance's container (domain/instance-events.ts). */
export interface InstanceEventsTable {
  environment_id: string;
  /** The environment's events in the order recorded (a fact whose details change moves up). */
  seq: number;
  deployment_id: string;
  region: string;
  instance: string;
  kind: string;
  reason: string;
  at_ms: number;
  exit_code: number | null;
  restarts: number;
  image: string;
  message: string;
  recorded_at: number;
}

/** Migration 0030: a workspace's notification channels (domain/notifications.ts). */
export interface NotificationChannelsTable {
  id: string;
  workspace_id: string;
  name: string;
  /** "slack", "webhook" or "email". */
  type: string;
  /** Where it delivers, without credentials (a URL's scheme and host, or the recipients). */
  target: string;
  /** JSON: the type's plain settings (email: {"to": [...]}). */
  config: string;
  /** The URL (slack, webhook), sealed with the workspace's data key. */
  url_sealed: Uint8Array | null;
  /** The webhook's HMAC key, sealed likewise. */
  secret_sealed: Uint8Array | null;
  /** JSON list of event names; []: every event. */
  events: string;
  /** JSON list of "project/environment"; []: every environment. */
  environments: string;
  consecutive_failures: number;
  last_error: string | null;
  last_failure_at: number | null;
  last_success_at: number | null;
  dropped: number;
  created_at: number;
}

/** Migration 0030: what happened, to be delivered (the outbox of notifications). */
export interface NotificationEventsTable {
  /** The receivers' idempotency key. */
  id: string;
  workspace_id: string;
  environment_id: string | null;
  /** The environment's id, or "ws:<workspace id>": deliveries keep the order of a lane. */
  lane: string;
  seq: number;
  type: string;
  at: number;
  /** JSON NotificationBody (../../contracts/notifications.ts). */
  body: string;
}

/** Migration 0030: one event for one channel. */
export interface NotificationDeliveriesTable {
  channel_id: string;
  event_id: string;
  lane: string;
  seq: number;
  /** "pending", "delivered" or "dropped". */
  state: string;
  attempts: number;
  /** When it may be tried next (a claim moves it ahead by a lease). */
  next_attempt_at: number;
  last_error: string | null;
  created_at: number;
  done_at: number | null;
}

/** Migration 0030: the installation's SMTP server (one row, id "installation"). */
export interface SmtpSettingsTable {
  id: string;
  host: string;
  port: number;
  /** "starttls", "tls" or "none". */
  security: string;
  username: string;
  /** Sealed with the installation's data key; null: no password. */
  password_sealed: Uint8Array | null;
  from_address: string;
  updated_at: number;
}

/** Migration 0032: a source archive's chunks, uploaded in order. */
export interface BuildSourceChunksTable {
  project_id: string;
  /** "sha256:<hex>" of the whole archive, as the uploader said. */
  digest: string;
  /** Where the chunk starts in the archive. */
  position: number;
  /** The whole archive's size. */
  size: number;
  data: Uint8Array;
  created_at: number;
}

/** Migration 0032: a build from source. */
export interface BuildsTable {
  id: string;
  workspace_id: string;
  project_id: string;
  environment_id: string;
  /** 1: goes before other environments' builds. */
  production: number;
  /** BuildState (src/builds/queue.ts). */
  state: string;
  source_digest: string;
  dockerfile: string | null;
  deploy: number;
  image: string | null;
  image_digest: string | null;
  deployment_id: string | null;
  error: string | null;
  failed_step: string | null;
  /** JSON list of the failed step's last lines. */
  failed_output: string | null;
  /** The log's lines, "\n" between (its newest lines when it grew past the bound). */
  log: string;
  /** Lines ever logged (the log's first kept line is log_lines minus the kept ones). */
  log_lines: number;
  /** While running: the worker holds it until then (renewed as it logs). */
  lease_until: number | null;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  /** Migration 0043: the repository, branch and commit built (null: an uploaded source). */
  repository_id: string | null;
  branch: string | null;
  commit_sha: string | null;
  /** The commit status posted last (JSON), and when the next is due (null: none). */
  status_reported: string | null;
  status_due_at: number | null;
  /** Migration 0045: the preview a pull request's build makes (null: a branch's build). */
  preview: string | null;
  pr_number: number | null;
  /** 1: the pull request comes from a fork. */
  pr_fork: number | null;
}

/** Migration 0043: a project's git repository. */
export interface RepositoriesTable {
  id: string;
  workspace_id: string;
  project_id: string;
  /** "github" or "gitlab". */
  provider: string;
  url: string;
  /** "https" or "ssh". */
  transport: string;
  /** The repository's path at its host ("owner/name"), what push events name. */
  path: string;
  /** "token", "deploy_key" or "none". */
  credential_kind: string;
  credential_username: string;
  credential_sealed: Uint8Array | null;
  /** As preview_hooks.verification. */
  webhook_verification: string;
  webhook_secret_sealed: Uint8Array;
  status_api_url: string;
  status_token_sealed: Uint8Array | null;
  /** JSON object: branch → environment slug. */
  branches: string;
  /** Migration 0045: the environment (slug) pull requests' previews are made from; "": none. */
  preview_base: string;
  /** 1: pull requests from forks are built too. */
  preview_forks: number;
  created_at: number;
  updated_at: number;
}

export interface Database {
  repositories: RepositoriesTable;
  build_source_chunks: BuildSourceChunksTable;
  builds: BuildsTable;
  workspaces: WorkspacesTable;
  projects: ProjectsTable;
  environments: EnvironmentsTable;
  environment_regions: EnvironmentRegionsTable;
  autoscale_status: AutoscaleStatusTable;
  deployments: DeploymentsTable;
  sentinels: SentinelsTable;
  desired_objects: DesiredObjectsTable;
  outbox: OutboxTable;
  stream_versions: StreamVersionsTable;
  regions: RegionsTable;
  clusters: ClustersTable;
  api_tokens: ApiTokensTable;
  revoked_tokens: RevokedTokensTable;
  dashboard_sessions: DashboardSessionsTable;
  idempotency_keys: IdempotencyKeysTable;
  cluster_cursors: ClusterCursorsTable;
  instances: InstancesTable;
  deployment_reports: DeploymentReportsTable;
  rollouts: RolloutsTable;
  rollout_revisions: RolloutRevisionsTable;
  rollout_events: RolloutEventsTable;
  progressive_rollouts: ProgressiveRolloutsTable;
  environment_config: EnvironmentConfigTable;
  environment_secrets: EnvironmentSecretsTable;
  data_keys: DataKeysTable;
  registry_credentials: RegistryCredentialsTable;
  releases: ReleasesTable;
  release_objects: ReleaseObjectsTable;
  release_kinds: ReleaseKindsTable;
  release_status: ReleaseStatusTable;
  jobs: JobsTable;
  job_status: JobStatusTable;
  deletions: DeletionsTable;
  pending_deletions: PendingDeletionsTable;
  audit_events: AuditEventsTable;
  audit_chains: AuditChainsTable;
  audit_sink_cursors: AuditSinkCursorsTable;
  audit_sink_leases: AuditSinkLeasesTable;
  previews: PreviewsTable;
  preview_limits: PreviewLimitsTable;
  workspace_quotas: WorkspaceQuotasTable;
  preview_hooks: PreviewHooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  endpoints: EndpointsTable;
  domains: DomainsTable;
  gateway_reports: GatewayReportsTable;
  measurements: MeasurementsTable;
  metric_points: MetricPointsTable;
  alert_rules: AlertRulesTable;
  api_keys: ApiKeysTable;
  log_lines: LogLinesTable;
  log_retention: LogRetentionTable;
  log_archive_leases: LogArchiveLeasesTable;
  instance_events: InstanceEventsTable;
  notification_channels: NotificationChannelsTable;
  notification_events: NotificationEventsTable;
  notification_deliveries: NotificationDeliveriesTable;
  smtp_settings: SmtpSettingsTable;
  members: MembersTable;
  service_accounts: ServiceAccountsTable;
  oidc_logins: OidcLoginsTable;
  member_sessions: MemberSessionsTable;
}

export type WorkspaceRow = Selectable<WorkspacesTable>;
export type ProjectRow = Selectable<ProjectsTable>;
export type EnvironmentRow = Selectable<EnvironmentsTable>;
export type AlertRuleRow = Selectable<AlertRulesTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type RepositoryRow = Selectable<RepositoriesTable>;
export type DeploymentRow = Selectable<DeploymentsTable>;
export type BuildRow = Selectable<BuildsTable>;
export type SentinelRow = Selectable<SentinelsTable>;
export type EndpointRow = Selectable<EndpointsTable>;
export type DomainRow = Selectable<DomainsTable>;
export type ClusterRow = Selectable<ClustersTable>;
export type InstanceRow = Selectable<InstancesTable>;
export type OutboxRow = Selectable<OutboxTable>;
export type ReleaseRow = Selectable<ReleasesTable>;
export type JobRow = Selectable<JobsTable>;
export type NewOutboxRow = Insertable<OutboxTable>;
export type AuditEventRow = Selectable<AuditEventsTable>;
export type InstanceEventRow = Selectable<InstanceEventsTable>;
export type PreviewRow = Selectable<PreviewsTable>;
export type PreviewHookRow = Selectable<PreviewHooksTable>;
export type NotificationChannelRow = Selectable<NotificationChannelsTable>;
export type NotificationEventRow = Selectable<NotificationEventsTable>;
export type NotificationDeliveryRow = Selectable<NotificationDeliveriesTable>;
export type SmtpSettingsRow = Selectable<SmtpSettingsTable>;
export type MemberRow = Selectable<MembersTable>;
export type ServiceAccountRow = Selectable<ServiceAccountsTable>;
export type MemberSessionRow = Selectable<MemberSessionsTable>;

/** Lists and small records are stored as JSON text; a malformed or non-list value reads as []. */
export function parseJsonList<T>(text: string): T[] {
  const v: unknown = JSON.parse(text);
  return Array.isArray(v) ? (v as T[]) : [];
}
