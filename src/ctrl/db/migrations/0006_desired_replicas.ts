// Migration 0006_desired_replicas: desired replicas get a typed column, desired_objects.replicas,
// the source of truth for how many replicas of a deployment each region should run. Before it,
// the count existed only inside the encoded ApplyDeployment payloads; this back-fills the column
// from them (the one place that ever reads a count out of a payload). Sentinel rows stay null:
// their replicas are the environment's sentinel_replicas, the same in every region. The copy the
// rollout driver kept in rollout_revisions.replicas (always written with the payload, read only
// while the revision was desired) is dropped: the column is the only one.
//
// ctrl processes of an older release must not share the database once this ran (they write
// payloads without the column): stop them before starting this release.
//
// The back-fill pages through the deployment rows in key order and updates them grouped by
// (region, count), so a region with 100,000 desired deployments takes a few hundred statements.
// A payload that does not decode fails the migration (and ctrl's start) rather than guess.
// Never edit once shipped.
import { fromBinary } from "@bufbuild/protobuf";
import { sql, type Kysely } from "kysely";
import { ApplyDeploymentSchema } from "../../../gen/krane/ctrl/v1/cluster_pb.js";
import { runSchema, type KraneMigration } from "./migration.js";

const PAGE = 1000;

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`alter table "desired_objects" add column "replicas" integer;`;
    let region = "";
    let objectId = "";
    for (;;) {
      const page = await sql<{ region: string; object_id: string; payload: Uint8Array }>`
        SELECT region, object_id, payload FROM desired_objects
        WHERE kind = 'deployment' AND (region > ${region} OR (region = ${region} AND object_id > ${objectId}))
        ORDER BY region, object_id
        LIMIT ${PAGE}`.execute(db);
      const groups = new Map<string, { region: string; replicas: number; ids: string[] }>();
      for (const row of page.rows) {
        let replicas: number;
        try {
          replicas = fromBinary(ApplyDeploymentSchema, row.payload).replicas;
        } catch (err) {
          throw new Error(
            `desired deployment ${row.object_id} in region ${row.region}: payload does not decode: ${err instanceof Error ? err.message : String(err)}`,
          );
        }
        const key = `${row.region}\u0000${replicas}`;
        const g = groups.get(key);
        if (g) g.ids.push(row.object_id);
        else groups.set(key, { region: row.region, replicas, ids: [row.object_id] });
      }
      for (const g of groups.values()) {
        await sql`
          UPDATE desired_objects SET replicas = ${g.replicas}
          WHERE kind = 'deployment' AND region = ${g.region} AND object_id IN (${sql.join(g.ids)})`.execute(db);
      }
      const last = page.rows[page.rows.length - 1];
      if (last === undefined || page.rows.length < PAGE) break;
      region = last.region;
      objectId = last.object_id;
    }
    await runSchema(db)`alter table "rollout_revisions" drop column "replicas";`;
  },
};
