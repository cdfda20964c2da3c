// Custom domains: an environment claims a hostname, ctrl issues a token, and the domain is
// routed only once a TXT record `_krane-challenge.<hostname>` holds `krane-domain-verify=<token>`.
// A hostname belongs to one environment in the whole installation (a unique column): a second
// claim is refused, unless the first one failed (a claim nobody can prove must not squat a name).
// ctrl re-checks on a schedule (`nextCheck`, pure): pending claims often at first, then less
// often, until they fail after `pendingTimeoutMs`; verified ones now and then, and a verified
// domain whose record disappears stays routed for `lostGraceMs` before it fails and its routes go.
// DNS lookups go through `TxtResolver`, so tests use a real DNS server on loopback.
import { randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database, DomainRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError, alreadyExists, invalidArgument, notFound } from "../errors.js";
import type { DomainInput } from "../validate/exposure.js";
import { isPlatformHostname, refreshExposure, type ExposureSettings } from "./exposure.js";
import { newId } from "./ids.js";
import { findEnvironment, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

export const TXT_PREFIX = "_krane-challenge";
export const TXT_VALUE_PREFIX = "krane-domain-verify=";
/** Domains per environment. */
export const DOMAINS_PER_ENVIRONMENT = 50;
/** next_check_at of a domain that is not checked on a schedule (failed). */
export const NEVER = Number.MAX_SAFE_INTEGER;

export function txtName(hostname: string): string {
  return `${TXT_PREFIX}.${hostname}`;
}

export function txtValue(token: string): string {
  return `${TXT_VALUE_PREFIX}${token}`;
}

/** A DNS lookup of TXT records (node:dns's Resolver#resolveTxt shape: chunks per record). */
export interface TxtResolver {
  resolveTxt(name: string): Promise<string[][]>;
}

export interface DomainCheckPolicy {
  /** First re-check of a pending claim; doubles per check up to pendingMaxMs. */
  readonly pendingFirstMs: number;
  readonly pendingMaxMs: number;
  /** A claim not verified within this long fails (checks stop; `verify` starts them again). */
  readonly pendingTimeoutMs: number;
  /** Re-check interval of a verified domain. */
  readonly verifiedIntervalMs: number;
  /** A verified domain whose record is gone: re-checked this often, routed for lostGraceMs. */
  readonly lostIntervalMs: number;
  readonly lostGraceMs: number;
}

export const DEFAULT_DOMAIN_CHECKS: DomainCheckPolicy = {
  pendingFirstMs: 15_000,
  pendingMaxMs: 10 * 60_000,
  pendingTimeoutMs: 72 * 3600_000,
  verifiedIntervalMs: 6 * 3600_000,
  lostIntervalMs: 10 * 60_000,
  lostGraceMs: 72 * 3600_000,
};

export type CheckOutcome = { ok: true } | { ok: false; error: string };

export interface DomainTransition {
  state: "pending" | "verified" | "failed";
  lastError: string | null;
  verifiedAt: number | null;
  lostSince: number | null;
  nextCheckAt: number;
}

/** Pure: a domain's next state and check time after a check at `now`. */
export function nextCheck(
  d: Pick<DomainRow, "state" | "created_at" | "verified_at" | "lost_since" | "last_checked_at">,
  outcome: CheckOutcome,
  now: number,
  p: DomainCheckPolicy,
): DomainTransition {
  if (outcome.ok) {
    return {
      state: "verified",
      lastError: null,
      verifiedAt: d.state === "verified" ? (d.verified_at ?? now) : now,
      lostSince: null,
      nextCheckAt: now + p.verifiedIntervalMs,
    };
  }
  if (d.state === "verified") {
    const lostSince = d.lost_since ?? now;
    if (now - lostSince >= p.lostGraceMs)
      return {
        state: "failed",
        lastError: `${outcome.error} (missing since ${new Date(lostSince).toISOString()})`,
        verifiedAt: d.verified_at,
        lostSince,
        nextCheckAt: NEVER,
      };
    return {
      state: "verified",
      lastError: outcome.error,
      verifiedAt: d.verified_at,
      lostSince,
      nextCheckAt: now + p.lostIntervalMs,
    };
  }
  // pending, or failed and checked again on request
  const started = d.state === "failed" ? now : d.created_at;
  if (d.state === "pending" && now - started >= p.pendingTimeoutMs)
    return { state: "failed", lastError: outcome.error, verifiedAt: null, lostSince: null, nextCheckAt: NEVER };
  const age = Math.max(0, now - started);
  const interval = Math.min(
    p.pendingMaxMs,
    Math.max(p.pendingFirstMs, 2 ** Math.floor(Math.log2(1 + age / p.pendingFirstMs)) * p.pendingFirstMs),
  );
  return { state: "pending", lastError: outcome.error, verifiedAt: null, lostSince: null, nextCheckAt: now + interval };
}

/** Looks up the TXT record and says whether it proves the token; never throws. */
export async function lookUp(resolver: TxtResolver, hostname: string, token: string): Promise<CheckOutcome> {
  const name = txtName(hostname);
  let records: string[][];
  try {
    records = await resolver.resolveTxt(name);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENODATA" || code === "ENOTFOUND") return { ok: false, error: `no TXT record at ${name}` };
    return {
      ok: false,
      error: `DNS lookup of ${name} failed (${code ?? (err instanceof Error ? err.message : String(err))})`,
    };
  }
  const want = txtValue(token);
  if (records.some((chunks) => chunks.join("") === want)) return { ok: true };
  return { ok: false, error: `the TXT record at ${name} does not hold ${TXT_VALUE_PREFIX}<the domain's token>` };
}

export async function addDomain(
  store: Store,
  input: DomainInput,
  settings: ExposureSettings,
  policy: DomainCheckPolicy,
): Promise<{ context: EnvironmentContext; domain: DomainRow }> {
  if (isPlatformHostname(settings, input.hostname)) {
    throw invalidArgument(
      "hostname",
      `is under the platform's own domain (${settings.publicApex} / ${settings.organizationApex}); endpoints get those names`,
    );
  }
  try {
    return await store.write(async (tx) => {
      const context = await findEnvironment(tx.trx, input.ref);
      return { context, domain: await addDomainIn(tx, context, input.hostname, policy) };
    });
  } catch (err) {
    if (store.isUniqueViolation(err))
      throw alreadyExists(`domain "${input.hostname}" (claimed by another environment)`);
    throw err;
  }
}

/**
 * addDomain as a step of the caller's transaction (the platform's own hostnames are refused
 * before: isPlatformHostname). A hostname another environment claims is a unique violation,
 * which aborts the transaction.
 */
export async function addDomainIn(
  tx: WriteTx,
  context: EnvironmentContext,
  hostname: string,
  policy: DomainCheckPolicy,
): Promise<DomainRow> {
  const existing = await tx.trx.selectFrom("domains").selectAll().where("hostname", "=", hostname).executeTakeFirst();
  if (existing) {
    if (existing.environment_id === context.environment.id) return existing;
    // Another environment's (perhaps another tenant's): never say whose.
    if (existing.state !== "failed") throw alreadyExists(`domain "${hostname}" (claimed by another environment)`);
    await tx.trx.deleteFrom("domains").where("id", "=", existing.id).execute();
    await refreshExposure(tx, existing.environment_id);
  }
  const count = await tx.trx
    .selectFrom("domains")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("environment_id", "=", context.environment.id)
    .executeTakeFirstOrThrow();
  if (Number(count.n) >= DOMAINS_PER_ENVIRONMENT)
    throw new DomainError("failed_precondition", `an environment may have at most ${DOMAINS_PER_ENVIRONMENT} domains`);
  const domain: DomainRow = {
    id: newId("dom"),
    environment_id: context.environment.id,
    workspace_id: context.workspace.id,
    project_id: context.project.id,
    hostname,
    token: randomBytes(24).toString("base64url"),
    state: "pending",
    last_error: null,
    last_checked_at: null,
    verified_at: null,
    lost_since: null,
    next_check_at: tx.now + policy.pendingFirstMs,
    created_at: tx.now,
  };
  await tx.trx.insertInto("domains").values(domain).execute();
  tx.environmentChanged(context.environment.id);
  return domain;
}

export async function findDomain(db: Reader, input: DomainInput): Promise<DomainRow> {
  const { environment } = await findEnvironment(db, input.ref);
  const d = await db
    .selectFrom("domains")
    .selectAll()
    .where("environment_id", "=", environment.id)
    .where("hostname", "=", input.hostname)
    .executeTakeFirst();
  if (!d) throw notFound(`domain "${input.hostname}" of environment "${environment.slug}"`);
  return d;
}

export async function removeDomain(store: Store, input: DomainInput): Promise<void> {
  await store.write(async (tx) => removeDomainIn(tx, await findDomain(tx.trx, input)));
}

/** removeDomain as a step of the caller's transaction. */
export async function removeDomainIn(tx: WriteTx, d: Pick<DomainRow, "id" | "environment_id">): Promise<void> {
  await tx.trx.deleteFrom("domains").where("id", "=", d.id).execute();
  await refreshExposure(tx, d.environment_id);
}

/**
 * Checks one domain now (the lookup outside any transaction), then records the outcome and,
 * when whether it is routed changed, refreshes the environment's exposure. `expectToken` guards
 * against a claim replaced while the lookup ran. Returns the row as stored, or undefined when
 * the claim is gone.
 */
export async function checkDomain(
  store: Store,
  resolver: TxtResolver,
  id: string,
  settings: ExposureSettings,
  policy: DomainCheckPolicy,
): Promise<DomainRow | undefined> {
  const before = await store.db.selectFrom("domains").selectAll().where("id", "=", id).executeTakeFirst();
  if (!before) return undefined;
  const outcome = await lookUp(resolver, before.hostname, before.token);
  return store.write(async (tx) => {
    const d = await tx.trx.selectFrom("domains").selectAll().where("id", "=", id).executeTakeFirst();
    if (!d || d.token !== before.token) return d;
    const t = nextCheck(d, outcome, tx.now, policy);
    const patch = {
      state: t.state,
      last_error: t.lastError,
      verified_at: t.verifiedAt,
      lost_since: t.lostSince,
      next_check_at: t.nextCheckAt,
      last_checked_at: tx.now,
    };
    await tx.trx.updateTable("domains").set(patch).where("id", "=", id).execute();
    tx.environmentChanged(d.environment_id);
    if ((d.state === "verified") !== (t.state === "verified")) await refreshExposure(tx, d.environment_id);
    return { ...d, ...patch };
  });
}

/**
 * Claims the domains due for a check (up to `limit`): their next check moves `leaseMs` ahead, so
 * another ctrl replica sweeping at the same time does not check them too. Returns their ids.
 */
export async function claimDueDomains(store: Store, limit: number, leaseMs: number): Promise<string[]> {
  return store.write(async (tx) => {
    const due = await tx.trx
      .selectFrom("domains")
      .select("id")
      .where("next_check_at", "<=", tx.now)
      .orderBy("next_check_at")
      .limit(limit)
      .execute();
    const ids = due.map((d) => d.id);
    if (ids.length === 0) return [];
    const claimed = await tx.trx
      .updateTable("domains")
      .set({ next_check_at: tx.now + leaseMs })
      .where("id", "in", ids)
      .where("next_check_at", "<=", tx.now)
      .returning("id")
      .execute();
    return claimed.map((d) => d.id);
  });
}
