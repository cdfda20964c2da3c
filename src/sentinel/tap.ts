// The live request view's tap (`krane requests -f`): while the agent asks (GET /requests on the
// ops port, at least every REQUESTS_IDLE_MS), each finished request is kept as a small record, at
// most REQUESTS_PER_SECOND a second and the last RING of them; past either it is only counted.
// Nobody asking: `active` is false and the request path does nothing more than read it.
import {
  REQUESTS_IDLE_MS,
  REQUESTS_PER_SECOND,
  type SentinelRequestRecord,
  type SentinelRequests,
} from "../contracts/request-view.js";

/** Records kept for the next ask (a few seconds at the rate bound). */
const RING = 256;

export class RequestTap {
  /** True while someone watches: the request path records only then. */
  active = false;
  readonly #perSecond: number;
  readonly #idleMs: number;
  #records: SentinelRequestRecord[] = [];
  #seq = 0;
  #skipped = 0;
  #second = 0;
  #inSecond = 0;
  #idle: NodeJS.Timeout | undefined;
  /** The highest `after` asked: records up to it were taken. */
  #taken = 0;

  constructor(o: { perSecond?: number; idleMs?: number } = {}) {
    this.#perSecond = o.perSecond ?? REQUESTS_PER_SECOND;
    this.#idleMs = o.idleMs ?? REQUESTS_IDLE_MS;
  }

  /**
   * Whether a request finished at `timeMs` is kept (someone watches, and the second has room);
   * one that is not is counted as skipped. The request path asks this before it makes a record,
   * so past the bound a request costs a clock read and a comparison.
   */
  admit(timeMs: number): boolean {
    if (!this.active) return false;
    const second = Math.floor(timeMs / 1000);
    if (second !== this.#second) {
      this.#second = second;
      this.#inSecond = 0;
    }
    if (this.#inSecond >= this.#perSecond) {
      this.#skipped++;
      return false;
    }
    this.#inSecond++;
    return true;
  }

  /** Records `r` when admit() keeps it. */
  record(r: Omit<SentinelRequestRecord, "seq">): void {
    if (this.admit(r.timeMs)) this.keep(r);
  }

  /** Keeps a record admit() let through. */
  keep(r: Omit<SentinelRequestRecord, "seq">): void {
    this.#records.push({ ...r, seq: ++this.#seq });
    if (this.#records.length > RING) {
      const gone = this.#records.shift();
      if (gone && gone.seq > this.#taken) this.#skipped++;
    }
  }

  /** The records after `after`; starts (or keeps) recording for REQUESTS_IDLE_MS. */
  read(after: number): SentinelRequests {
    this.active = true;
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => this.#stop(), this.#idleMs);
    this.#idle.unref();
    this.#taken = Math.max(this.#taken, after);
    return { seq: this.#seq, skipped: this.#skipped, records: this.#records.filter((r) => r.seq > after) };
  }

  #stop(): void {
    this.active = false;
    this.#records = [];
  }

  close(): void {
    clearTimeout(this.#idle);
    this.#stop();
  }
}
