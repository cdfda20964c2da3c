// The release kind (issue 16): a versioned set of arbitrary allow-listed objects of an
// environment, desired in each of its regions and applied there by the agent's release
// controller (src/agent/releases). This file is the kind's ctrl side: rows → ApplyRelease /
// DeleteRelease (pure), the validation and recording of its agents' reports (per region, the
// version observed and each object's health: the inventory), and its ClusterService methods.
import { create, toBinary } from "@bufbuild/protobuf";
import {
  ApplyReleaseSchema,
  DeleteReleaseSchema,
  GetDesiredReleaseStatesResponseSchema,
  ObjectHealth,
  ReleaseKindSchema,
  ReleaseObjectSchema,
  ReleaseStateSchema,
  type ReportReleaseStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { Selectable } from "kysely";
import type { EnvironmentRow, ReleaseKindsTable, ReleaseObjectsTable, ReleaseRow, WorkspaceRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError, invalidArgument, notFound } from "../errors.js";
import * as r from "../validate/rules.js";
import type { Kind } from "./kind.js";

// ---------------------------------------------------------------- payload encoding

export interface ReleaseContext {
  workspace: WorkspaceRow;
  environment: EnvironmentRow;
  release: ReleaseRow;
  objects: Selectable<ReleaseObjectsTable>[];
  kindsEver: Selectable<ReleaseKindsTable>[];
}

function kindsOf(rows: readonly { api_group: string; api_version: string; kind: string }[]) {
  return rows.map((k) => create(ReleaseKindSchema, { group: k.api_group, version: k.api_version, kind: k.kind }));
}

export function encodeApplyRelease(ctx: ReleaseContext, region: string): Uint8Array {
  const { workspace, environment, release } = ctx;
  return toBinary(
    ApplyReleaseSchema,
    create(ApplyReleaseSchema, {
      workspaceId: workspace.id,
      projectId: environment.project_id,
      environmentId: environment.id,
      releaseId: release.id,
      k8sNamespace: workspace.k8s_namespace,
      name: release.name,
      version: BigInt(release.version),
      region,
      objects: [...ctx.objects]
        .sort((a, b) => a.seq - b.seq)
        .map((o) =>
          create(ReleaseObjectSchema, {
            id: o.object_id,
            kind: create(ReleaseKindSchema, { group: o.api_group, version: o.api_version, kind: o.kind }),
            name: o.name,
            manifestJson: o.manifest,
            sealed: o.sealed !== null,
          }),
        ),
      kindsEver: kindsOf(ctx.kindsEver),
    }),
  );
}

export function encodeDeleteRelease(
  workspace: WorkspaceRow,
  release: ReleaseRow,
  kindsEver: readonly { api_group: string; api_version: string; kind: string }[],
): Uint8Array {
  return toBinary(
    DeleteReleaseSchema,
    create(DeleteReleaseSchema, {
      releaseId: release.id,
      k8sNamespace: workspace.k8s_namespace,
      kindsEver: kindsOf(kindsEver),
    }),
  );
}

// ---------------------------------------------------------------- reports

export type ObjectHealthName =
  "unknown" | "progressing" | "healthy" | "degraded" | "suspended" | "kind-missing" | "refused";

export interface ReportedObject {
  id: string;
  group: string;
  version: string;
  kind: string;
  namespace: string;
  name: string;
  health: ObjectHealthName;
  message: string;
}

export type ReleaseReport =
  | { type: "update"; id: string; version: number; objects: ReportedObject[] }
  | { type: "delete"; id: string }
  | { type: "rejected"; id: string; reason: string };

export function healthName(field: string, h: ObjectHealth): ObjectHealthName {
  switch (h) {
    case ObjectHealth.UNSPECIFIED:
      return "unknown";
    case ObjectHealth.PROGRESSING:
      return "progressing";
    case ObjectHealth.HEALTHY:
      return "healthy";
    case ObjectHealth.DEGRADED:
      return "degraded";
    case ObjectHealth.SUSPENDED:
      return "suspended";
    case ObjectHealth.KIND_MISSING:
      return "kind-missing";
    case ObjectHealth.REFUSED:
      return "refused";
    default:
      throw invalidArgument(field, "is not a known object health");
  }
}

/** Messages from the API server may span lines; status keeps them on one. */
function oneLine(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f]+/g, " ");
}

export function validateReleaseReport(req: ReportReleaseStatusRequest): ReleaseReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const u = c.value;
      r.list("update.objects", u.objects, 1000);
      return {
        type: "update",
        id: r.id("update.release_id", u.releaseId, "rel"),
        version: r.intRange("update.version", u.version, 0, Number.MAX_SAFE_INTEGER),
        objects: u.objects.map((o, i) => {
          const f = `update.objects[${i}]`;
          return {
            id: r.text(`${f}.id`, o.id, 600, true),
            group: r.text(`${f}.kind.group`, o.kind?.group ?? "", 253),
            version: r.text(`${f}.kind.version`, o.kind?.version ?? "", 64),
            kind: r.text(`${f}.kind.kind`, o.kind?.kind ?? "", 63, true),
            namespace: r.text(`${f}.namespace`, o.namespace, 63),
            name: r.text(`${f}.name`, o.name, 253, true),
            health: healthName(`${f}.health`, o.health),
            message: r.text(`${f}.message`, oneLine(o.message), r.LIMITS.reasonMax),
          };
        }),
      };
    }
    case "delete":
      return { type: "delete", id: r.id("delete.release_id", c.value.releaseId, "rel") };
    case "rejected":
      return {
        type: "rejected",
        id: r.id("rejected.release_id", c.value.releaseId, "rel"),
        reason: r.text("rejected.reason", oneLine(c.value.reason), r.LIMITS.reasonMax, true),
      };
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

export async function recordReleaseReport(store: Store, region: string, report: ReleaseReport): Promise<void> {
  await store.write(async (tx) => {
    const rel = await tx.trx
      .selectFrom("releases")
      .select(["id", "environment_id"])
      .where("id", "=", report.id)
      .executeTakeFirst();
    if (!rel) {
      if (report.type === "delete") return;
      throw notFound(`release "${report.id}"`);
    }
    const regions = await tx.trx
      .selectFrom("desired_objects")
      .select("region")
      .where("kind", "=", "release")
      .where("object_id", "=", rel.id)
      .execute();
    const pending = await tx.trx
      .selectFrom("pending_deletions")
      .select("region")
      .where("kind", "=", "release")
      .where("object_id", "=", rel.id)
      .execute();
    if (![...regions, ...pending].some((x) => x.region === region) && report.type !== "delete") {
      throw new DomainError("permission_denied", `release ${rel.id} is not desired in region ${region}`);
    }
    if (report.type === "delete") {
      await tx.trx.deleteFrom("release_status").where("release_id", "=", rel.id).where("region", "=", region).execute();
      return;
    }
    const values =
      report.type === "update"
        ? {
            observed_version: report.version,
            objects: JSON.stringify(report.objects),
            rejected_reason: null,
            reported_at: tx.now,
          }
        : { rejected_reason: report.reason, reported_at: tx.now };
    await tx.trx
      .insertInto("release_status")
      .values({ release_id: rel.id, region, observed_version: 0, objects: "[]", ...values })
      .onConflict((oc) => oc.columns(["release_id", "region"]).doUpdateSet(values))
      .execute();
  });
}

// ---------------------------------------------------------------- descriptor

export const releaseKind: Kind<typeof ReleaseStateSchema, ReleaseReport> = {
  name: "release",
  idPrefix: "rel",
  wire: { state: ReleaseStateSchema, apply: ApplyReleaseSchema, delete: DeleteReleaseSchema },
  recordReport: recordReleaseReport,
  subject: (report) => ({ id: report.id, k8sName: "" }),
  methods: (h) => ({
    watchReleases: (req, ctx) => h.watch(req, ctx),
    getDesiredReleaseState: (req, ctx) => h.getOne(req, "release_id", req.releaseId, ctx),
    getDesiredReleaseStates: async (req, ctx) =>
      create(GetDesiredReleaseStatesResponseSchema, await h.getMany(req, "release_ids", req.releaseIds, ctx)),
    reportReleaseStatus: async (req, ctx) => {
      await h.report(req, () => validateReleaseReport(req), ctx);
      return {};
    },
  }),
};
