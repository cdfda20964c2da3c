// Exposure: the platform's settings for addresses (apexes, hostname patterns, which hostnames
// get certificates), hostname generation (pure), and `refreshExposure`, the one write that
// turns an environment's endpoint and domain rows into desired state: its gateway object in each
// of its regions (removed from regions it left, or when nothing is exposed) and the edge auth
// section its sentinels route by. Every endpoint or domain write calls it in its transaction.
// The agents' gateway reports (table gateway_reports: each route's conditions and certificates
// per region) are recorded here too.
import { createHash } from "node:crypto";
import type { WriteTx } from "../db/outbox.js";
import type { EnvironmentRow, ProjectRow, WorkspaceRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError } from "../errors.js";
import {
  edgeAuthPolicy,
  encodeApplyGateway,
  encodeDeleteGateway,
  exposureRoutes,
  gatewayK8sName,
  gatewayPayloads,
  type GatewayContext,
} from "../payloads/gateway.js";
import type { Visibility } from "../validate/exposure.js";
import { setEdgeAuth } from "./environments.js";
import { notify, type Notice } from "./notifications.js";
import { environmentContext } from "./tenancy.js";

export interface ExposureSettings {
  /** Generated public hostnames are `<label>.<publicApex>`. */
  readonly publicApex: string;
  /** Generated organization hostnames are `<label>.<organizationApex>`. */
  readonly organizationApex: string;
  /** The label of a generated hostname: {env}, {project} and {workspace} are replaced. */
  readonly hostPattern: string;
  /** The label of a workspace's shared host (path routing). */
  readonly sharedHostPattern: string;
  /** https unless the Gateways serve plain HTTP (local clusters). */
  readonly scheme: "https" | "http";
}

export const DEFAULT_EXPOSURE: ExposureSettings = {
  publicApex: "krane.localhost",
  organizationApex: "internal.krane.localhost",
  hostPattern: "{env}-{project}-{workspace}",
  sharedHostPattern: "{workspace}",
  scheme: "https",
};

const PLACEHOLDER = /\{(env|project|workspace)\}/g;

/** Checks an apex and a pattern at start-up (ctrl refuses to start with bad ones). */
export function checkExposureSettings(s: ExposureSettings): void {
  for (const [what, apex] of [
    ["public apex", s.publicApex],
    ["organization apex", s.organizationApex],
  ] as const) {
    if (apex.length > 200 || !apex.split(".").every((l) => /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(l))) {
      throw new Error(`${what} "${apex}" is not a lowercase DNS name`);
    }
  }
  for (const [what, p] of [
    ["host pattern", s.hostPattern],
    ["shared host pattern", s.sharedHostPattern],
  ] as const) {
    const filled = p.replace(PLACEHOLDER, "a");
    if (/[{}]/.test(filled) || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(filled)) {
      throw new Error(
        `${what} "${p}" must be one DNS label made of {env}, {project}, {workspace}, letters, digits and '-'`,
      );
    }
  }
}

function hash6(s: string): string {
  return createHash("sha256").update(s).digest("hex").slice(0, 6);
}

/** A pattern filled with the slugs, as one DNS label (a hash keeps it unique when cut to 63). */
export function hostLabel(
  pattern: string,
  slugs: { env: string; project: string; workspace: string },
  salt: string,
): string {
  const label = pattern.replace(PLACEHOLDER, (_m, k: "env" | "project" | "workspace") => slugs[k]);
  if (label.length <= 63) return label;
  return `${label.slice(0, 56).replace(/-+$/, "")}-${hash6(salt)}`;
}

/** The same label made unique with a hash of the environment id (a generated name was taken). */
export function disambiguated(label: string, environmentId: string): string {
  return `${label.slice(0, 56).replace(/-+$/, "")}-${hash6(environmentId)}`;
}

export function apexOf(s: ExposureSettings, v: Visibility): string {
  return v === "public" ? s.publicApex : s.organizationApex;
}

/** Whether a hostname is the platform's (an apex or under one): never claimable as a custom domain. */
export function isPlatformHostname(s: ExposureSettings, hostname: string): boolean {
  return [s.publicApex, s.organizationApex].some((apex) => hostname === apex || hostname.endsWith(`.${apex}`));
}

export function endpointUrl(s: ExposureSettings, hostname: string, pathPrefix: string): string {
  return `${s.scheme}://${hostname}${pathPrefix === "/" ? "/" : `${pathPrefix}/`}`;
}

export interface ExposureScope {
  workspace: WorkspaceRow;
  project: ProjectRow;
  environment: EnvironmentRow;
}

export function gatewayContext(c: ExposureScope): GatewayContext {
  return {
    workspaceId: c.workspace.id,
    projectId: c.project.id,
    environmentId: c.environment.id,
    namespace: c.workspace.k8s_namespace,
    k8sName: gatewayK8sName(c.project.slug, c.environment.slug, c.environment.id),
  };
}

/**
 * Makes the environment's desired exposure match its rows, in the caller's transaction: the
 * gateway object in every region of the environment (or its removal when nothing is exposed),
 * its removal from regions the environment left, and the sentinels' edge auth section (their
 * desired state is re-put only when it changed). Writes nothing that did not change.
 */
export async function refreshExposure(tx: WriteTx, environmentId: string): Promise<void> {
  tx.environmentChanged(environmentId);
  const environment = await tx.trx
    .selectFrom("environments")
    .selectAll()
    .where("id", "=", environmentId)
    .executeTakeFirst();
  // Gone, or being deleted: its exposure is being removed region by region (deletion.ts), and a
  // domain check finishing meanwhile must not desire its routes again.
  if (!environment || environment.deleting_at !== null) return;
  const { workspace, project } = await environmentContext(tx.trx, environment);
  const endpoints = await tx.trx
    .selectFrom("endpoints")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("visibility")
    .execute();
  const domains = await tx.trx
    .selectFrom("domains")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("hostname")
    .execute();
  const routes = exposureRoutes(endpoints, domains);
  const g = gatewayContext({ workspace, project, environment });

  const regions = (
    await tx.trx
      .selectFrom("environment_regions")
      .select("region")
      .where("environment_id", "=", environmentId)
      .execute()
  ).map((r) => r.region);
  const desiredIn = await tx.trx
    .selectFrom("desired_objects")
    .select(["region", "payload"])
    .where("kind", "=", gatewayPayloads.name)
    .where("object_id", "=", environmentId)
    .execute();
  const current = new Map(desiredIn.map((d) => [d.region, d.payload]));
  for (const region of regions) {
    if (routes.length === 0) continue;
    const payload = encodeApplyGateway(g, region, routes);
    const before = current.get(region);
    if (before && Buffer.from(before).equals(Buffer.from(payload))) continue;
    await tx.putDesired(region, gatewayPayloads.name, environmentId, payload);
  }
  for (const region of current.keys()) {
    if (routes.length > 0 && regions.includes(region)) continue;
    await tx.removeDesired(
      region,
      gatewayPayloads.name,
      environmentId,
      encodeDeleteGateway(environmentId, workspace.k8s_namespace),
    );
  }

  const auth = edgeAuthPolicy(routes);
  await setEdgeAuth(tx, project, environment, auth === null ? null : JSON.stringify(auth));
}

// ---------------------------------------------------------------- reports

/** A reported route as stored (gateway_reports.routes) and shown in status. */
export interface StoredRouteStatus {
  name: string;
  visibility: string;
  gateway: string;
  accepted: StoredCondition;
  resolvedRefs: StoredCondition;
  certificates: {
    hostname: string;
    secretName: string;
    ready: StoredCondition;
    /**
     * The hostname's HTTPS listener on the environment's Gateway; null (or absent, in reports
     * stored before listeners were reported) when the region's agent serves no HTTPS.
     */
    listener?: StoredCondition | null;
  }[];
  problem: string;
}

export interface StoredCondition {
  status: string;
  reason: string;
  message: string;
}

/** A validated report of an environment's exposure in a region (../kinds/gateway.ts). */
export type GatewayReport =
  | { type: "update"; id: string; routes: StoredRouteStatus[] }
  | { type: "delete"; id: string }
  | { type: "rejected"; id: string; reason: string };

export async function recordGatewayReport(store: Store, region: string, report: GatewayReport): Promise<void> {
  await store.write(async (tx) => {
    const env = await tx.trx.selectFrom("environments").select(["id"]).where("id", "=", report.id).executeTakeFirst();
    if (!env) return; // the environment is gone (its reports went with it)
    tx.environmentChanged(env.id);
    const known = await tx.trx
      .selectFrom("environment_regions")
      .select("region")
      .where("environment_id", "=", report.id)
      .where("region", "=", region)
      .executeTakeFirst();
    const desired = await tx.trx
      .selectFrom("desired_objects")
      .select("object_id")
      .where("kind", "=", gatewayPayloads.name)
      .where("region", "=", region)
      .where("object_id", "=", report.id)
      .executeTakeFirst();
    if (!known && !desired && report.type !== "delete")
      throw new DomainError("permission_denied", `environment ${report.id} is not in region ${region}`);
    if (report.type === "delete") {
      await tx.trx
        .deleteFrom("gateway_reports")
        .where("environment_id", "=", report.id)
        .where("region", "=", region)
        .execute();
      return;
    }
    const prev = await tx.trx
      .selectFrom("gateway_reports")
      .selectAll()
      .where("environment_id", "=", report.id)
      .where("region", "=", region)
      .executeTakeFirst();
    const row = {
      environment_id: report.id,
      region,
      routes: report.type === "update" ? JSON.stringify(report.routes) : (prev?.routes ?? "[]"),
      rejected_reason: report.type === "rejected" ? report.reason : null,
      reported_at: tx.now,
    };
    if (report.type === "update")
      for (const n of certificateNotices(
        JSON.parse(prev?.routes ?? "[]") as StoredRouteStatus[],
        report.routes,
        region,
      ))
        await notify(tx, { ...n, environmentId: report.id });
    if (prev) {
      await tx.trx
        .updateTable("gateway_reports")
        .set(row)
        .where("environment_id", "=", report.id)
        .where("region", "=", region)
        .execute();
    } else {
      await tx.trx.insertInto("gateway_reports").values(row).execute();
    }
  });
}

/**
 * What a region's new report says of certificates that stopped being ready: a hostname whose
 * certificate was Ready=True in the region's previous report and is False now (it expired, a
 * renewal failed, its secret was removed). A certificate still being issued for the first time is
 * not ready without having failed, so only a ready one turning not ready is told, once per turn.
 */
export function certificateNotices(
  previous: readonly StoredRouteStatus[],
  next: readonly StoredRouteStatus[],
  region: string,
): Omit<Notice, "environmentId">[] {
  const wasReady = new Set(
    previous.flatMap((r) => r.certificates.filter((c) => c.ready.status === "True").map((c) => c.hostname)),
  );
  const told = new Set<string>();
  const out: Omit<Notice, "environmentId">[] = [];
  for (const c of next.flatMap((r) => r.certificates)) {
    if (c.ready.status !== "False" || !wasReady.has(c.hostname) || told.has(c.hostname)) continue;
    told.add(c.hostname);
    const why = [c.ready.reason, c.ready.message].filter((x) => x !== "").join(": ");
    out.push({
      type: "certificate.failing",
      severity: "critical",
      summary: `certificate of ${c.hostname} not ready in ${region}`,
      text: `The certificate of ${c.hostname} was ready and is not any more${why === "" ? "" : ` (${why})`}; HTTPS clients of ${c.hostname} in ${region} may be refused.`,
      region,
      details: { hostname: c.hostname, reason: c.ready.reason, message: c.ready.message },
    });
  }
  return out;
}
