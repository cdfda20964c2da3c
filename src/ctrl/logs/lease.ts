// Which ctrl replica archives an environment's lines (table log_archive_leases): one at a time, so
// replicas on one PostgreSQL do not each follow every environment. The archive (archiver.ts)
// renews its leases at every sweep; a lease not renewed within its time (the replica stopped,
// crashed or lost the database) is taken by the next replica that sweeps, which asks the agents
// from each instance's last stored line: nothing is lost, and the store's key keeps a line that
// both relayed around the handover once. As with the audit sink's lease (domain/audit.ts), the
// rows are locked before they are read (in key order, so two replicas never deadlock).
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import type { Store } from "../db/store.js";

/** How long an archive lease lasts without renewal (ms). */
export const ARCHIVE_LEASE_MS = 15_000;

const CHUNK = 500;

/**
 * Takes the leases of `environmentIds` that are free or expired, and renews those `holder`
 * already has; answers the environments `holder` holds now.
 */
export async function leaseEnvironments(
  store: Store,
  holder: string,
  environmentIds: Iterable<string>,
  ttlMs: number,
): Promise<Set<string>> {
  const ids = [...new Set(environmentIds)].sort();
  const held = new Set<string>();
  for (let i = 0; i < ids.length; i += CHUNK) {
    const chunk = ids.slice(i, i + CHUNK);
    const mine = await store.write(async (tx) => {
      await tx.trx
        .insertInto("log_archive_leases")
        .values(chunk.map((environment_id) => ({ environment_id, holder, expires_at: tx.now + ttlMs })))
        .onConflict((oc) => oc.column("environment_id").doNothing())
        .execute();
      const rows = await tx.dialect
        .lockRows(
          tx.trx
            .selectFrom("log_archive_leases")
            .select(["environment_id", "holder", "expires_at"])
            .where("environment_id", "in", chunk)
            .orderBy("environment_id"),
          "update",
        )
        .execute();
      const take = rows
        .filter((r) => r.holder === holder || Number(r.expires_at) <= tx.now)
        .map((r) => r.environment_id);
      if (take.length > 0)
        await tx.trx
          .updateTable("log_archive_leases")
          .where("environment_id", "in", take)
          .set({ holder, expires_at: tx.now + ttlMs })
          .execute();
      return take;
    });
    for (const id of mine) held.add(id);
  }
  return held;
}

// The two deletes below look first and write only when there is something to delete: a write
// takes the database's write lock, and an idle ctrl must not ask for it every sweep (on SQLite,
// another process holding the file makes each such write wait out the busy timeout).

/** Gives up `holder`'s leases (a replica that stops: another takes its environments at once). */
export async function releaseLeases(db: Kysely<Database>, holder: string): Promise<void> {
  const any = await db
    .selectFrom("log_archive_leases")
    .select("environment_id")
    .where("holder", "=", holder)
    .executeTakeFirst();
  if (any) await db.deleteFrom("log_archive_leases").where("holder", "=", holder).execute();
}

/** Forgets leases that ended (environments no replica archives any more: gone, or without instances). */
export async function forgetExpiredLeases(db: Kysely<Database>, now: number): Promise<number> {
  const any = await db
    .selectFrom("log_archive_leases")
    .select("environment_id")
    .where("expires_at", "<", now)
    .executeTakeFirst();
  if (!any) return 0;
  const r = await db.deleteFrom("log_archive_leases").where("expires_at", "<", now).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Who holds each leased environment (tests, operators). */
export async function leaseHolders(db: Kysely<Database>, now: number): Promise<Map<string, string>> {
  const rows = await db
    .selectFrom("log_archive_leases")
    .select(["environment_id", "holder"])
    .where("expires_at", ">", now)
    .execute();
  return new Map(rows.map((r) => [r.environment_id, r.holder]));
}
