// Domain verification in the background: a reconciler on src/retry's WorkQueue keyed by domain
// id, like the rollout driver. A sweep every `sweepIntervalMs` claims the domains whose next
// check is due (claiming moves their next check ahead by a lease, so several ctrl replicas do
// not check the same domain at once) and queues them; a reconcile looks the TXT record up and
// records the outcome (../domain/domains.ts: state, next check, routes when that changed). A
// failed reconcile (the database, not DNS: a DNS failure is an outcome) retries with the key's
// backoff, and the lease brings it back after a crash. `verifyNow` is the API's "check now".
import type { Logger } from "pino";
import { pino } from "pino";
import type { BackoffPolicy } from "../../retry/backoff.js";
import type { Runnable } from "../../base/lifecycle.js";
import { DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { Store } from "../db/store.js";
import {
  DEFAULT_DOMAIN_CHECKS,
  checkDomain,
  claimDueDomains,
  type DomainCheckPolicy,
  type TxtResolver,
} from "../domain/domains.js";
import type { ExposureSettings } from "../domain/exposure.js";
import type { DomainRow } from "../db/schema.js";

/** Backoff of a domain whose check could not be recorded. */
export const CHECK_RETRY: BackoffPolicy = { baseMs: 500, capMs: 30_000, minMs: 100 };

export interface DomainVerifierOptions {
  readonly store: Store;
  readonly resolver: TxtResolver;
  readonly settings: ExposureSettings;
  readonly policy?: Partial<DomainCheckPolicy>;
  /** How often due checks are looked for (ms); 0 disables the sweep. */
  readonly sweepIntervalMs?: number;
  /** How far a claimed check is pushed ahead (another replica's sweep skips it meanwhile). */
  readonly leaseMs?: number;
  readonly concurrency?: number;
  readonly logger?: Logger;
}

export class DomainVerifier implements Runnable {
  readonly name = "domains";
  readonly policy: DomainCheckPolicy;
  readonly #o: DomainVerifierOptions;
  readonly #work: DueWork;

  constructor(o: DomainVerifierOptions) {
    this.#o = o;
    this.policy = { ...DEFAULT_DOMAIN_CHECKS, ...o.policy };
    const log = o.logger ?? pino({ level: "silent" });
    this.#work = new DueWork({
      name: this.name,
      due: (limit) => claimDueDomains(o.store, limit, o.leaseMs ?? 60_000),
      reconcile: async (id) => {
        const d = await checkDomain(o.store, o.resolver, id, o.settings, this.policy);
        if (d) log.debug({ domain: d.hostname, state: d.state, error: d.last_error }, "domain checked");
        return Result.done;
      },
      sweepIntervalMs: o.sweepIntervalMs ?? 5_000,
      sweepLimit: 500,
      concurrency: o.concurrency ?? 8,
      retry: CHECK_RETRY,
      onSweepError: (err) => log.warn({ err: err instanceof Error ? err.message : String(err) }, "domain sweep failed"),
      onResult: (id, r) => {
        if (r.type === "retry") log.warn({ domain: id, err: String(r.error) }, "domain check not recorded; will retry");
      },
    });
  }

  start(): void {
    this.#work.start();
  }

  /** Queues every domain whose check is due; resolves once they are queued. */
  sweep(): Promise<void> {
    return this.#work.sweep();
  }

  /** Checks one domain now and returns it as recorded. */
  async verifyNow(id: string): Promise<DomainRow | undefined> {
    return checkDomain(this.#o.store, this.#o.resolver, id, this.#o.settings, this.policy);
  }

  /** Resolves when no check is queued or running. */
  idle(): Promise<void> {
    return this.#work.idle();
  }

  stop(): Promise<void> {
    return this.#work.stop();
  }
}
