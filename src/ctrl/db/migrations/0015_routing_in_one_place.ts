// Migration 0015_routing_in_one_place: an environment's routing lives in one place,
// environments.routing_regions (the weights and preview revision per region) with
// routing_version. The environment-wide environments.routing_mode / routing_weights of 0007 go:
// "instances" (every running instance an equal share) is what a region without an entry routes
// by, and a "weighted" environment's weights become each of its regions' entry where the region
// had none of its own, so every sentinel serves the same policy before and after.
// Never edit once shipped.
import { sql, type Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

interface Weighted {
  id: string;
  routing_weights: string;
  routing_regions: string | null;
}

function parseObject(text: string | null): Record<string, unknown> {
  if (text === null) return {};
  const v: unknown = JSON.parse(text);
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    const weighted = await sql<Weighted>`
      SELECT id, routing_weights, routing_regions FROM environments WHERE routing_mode = 'weighted'`.execute(db);
    for (const e of weighted.rows) {
      const weights: unknown = JSON.parse(e.routing_weights);
      if (!Array.isArray(weights) || weights.length === 0) continue;
      const regions = await sql<{ region: string }>`
        SELECT region FROM environment_regions WHERE environment_id = ${e.id} ORDER BY region`.execute(db);
      const routing = parseObject(e.routing_regions);
      for (const { region } of regions.rows) routing[region] ??= { weights, preview: null };
      if (Object.keys(routing).length === 0) continue;
      await sql`UPDATE environments SET routing_regions = ${JSON.stringify(routing)} WHERE id = ${e.id}`.execute(db);
    }
    await runSchema(db)`
      alter table "environments" drop column "routing_mode";
      alter table "environments" drop column "routing_weights";
    `;
  },
};
