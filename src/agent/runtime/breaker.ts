// Circuit breaker around one controller's calls to ctrl: while ctrl keeps failing, a controller
// stops calling it for a while instead of piling retries on it, and keeps reconciling from what
// it already has.
//
// The state machine is pure (breakerAdmit / breakerRecord over a plain state value) and the
// CircuitBreaker class only adds a clock and the call wrapper. Semantics, fixing the original's
// quirks:
//  - closed: `failureThreshold` consecutive downstream failures trip it;
//  - open: calls are refused until `openMs` has passed *since the trip*;
//  - half-open: at most `halfOpenMaxCalls` trial calls at a time; `closeAfterSuccesses`
//    successful trials close it, one failed trial re-opens it (and restarts the open period);
//  - errors that are answers (NotFound, InvalidArgument, AlreadyExists, …) are not downstream
//    failures: the caller decides through `isFailure`, and they count as successes here;
//  - a call that was admitted under an earlier state (its "generation") does not move the
//    current state when it finishes late.

export type BreakerPhase = "closed" | "open" | "half-open";

export interface BreakerConfig {
  readonly failureThreshold: number;
  readonly openMs: number;
  readonly halfOpenMaxCalls: number;
  readonly closeAfterSuccesses: number;
}

export const defaultBreakerConfig: BreakerConfig = {
  failureThreshold: 5,
  openMs: 10_000,
  halfOpenMaxCalls: 1,
  closeAfterSuccesses: 1,
};

export interface BreakerState {
  readonly phase: BreakerPhase;
  /** Incremented on every phase change; tickets from older generations are ignored. */
  readonly generation: number;
  readonly consecutiveFailures: number;
  readonly openedAt: number;
  readonly trialsInFlight: number;
  readonly trialSuccesses: number;
}

export interface BreakerTicket {
  readonly generation: number;
  readonly trial: boolean;
}

export type AdmitResult =
  | { readonly admitted: true; readonly state: BreakerState; readonly ticket: BreakerTicket }
  | { readonly admitted: false; readonly state: BreakerState; readonly retryAfterMs: number };

export function initialBreakerState(): BreakerState {
  return { phase: "closed", generation: 0, consecutiveFailures: 0, openedAt: 0, trialsInFlight: 0, trialSuccesses: 0 };
}

function transition(s: BreakerState, phase: BreakerPhase, now: number): BreakerState {
  return {
    phase,
    generation: s.generation + 1,
    consecutiveFailures: 0,
    openedAt: phase === "open" ? now : s.openedAt,
    trialsInFlight: 0,
    trialSuccesses: 0,
  };
}

export function breakerAdmit(s: BreakerState, now: number, cfg: BreakerConfig): AdmitResult {
  let state = s;
  if (state.phase === "open") {
    const reopensAt = state.openedAt + cfg.openMs;
    if (now < reopensAt) return { admitted: false, state, retryAfterMs: reopensAt - now };
    state = transition(state, "half-open", now);
  }
  if (state.phase === "half-open") {
    if (state.trialsInFlight >= cfg.halfOpenMaxCalls) {
      // Some trial is still running; its answer decides. Ask again shortly.
      return { admitted: false, state, retryAfterMs: Math.max(1, Math.min(cfg.openMs, 1_000)) };
    }
    state = { ...state, trialsInFlight: state.trialsInFlight + 1 };
    return { admitted: true, state, ticket: { generation: state.generation, trial: true } };
  }
  return { admitted: true, state, ticket: { generation: state.generation, trial: false } };
}

export function breakerRecord(
  s: BreakerState,
  ticket: BreakerTicket,
  outcome: "success" | "failure",
  now: number,
  cfg: BreakerConfig,
): BreakerState {
  if (ticket.generation !== s.generation) return s;
  if (s.phase === "closed") {
    if (outcome === "success") return s.consecutiveFailures === 0 ? s : { ...s, consecutiveFailures: 0 };
    const failures = s.consecutiveFailures + 1;
    if (failures >= cfg.failureThreshold) return transition(s, "open", now);
    return { ...s, consecutiveFailures: failures };
  }
  if (s.phase === "half-open" && ticket.trial) {
    if (outcome === "failure") return transition(s, "open", now);
    const successes = s.trialSuccesses + 1;
    if (successes >= cfg.closeAfterSuccesses) return transition(s, "closed", now);
    return { ...s, trialsInFlight: Math.max(0, s.trialsInFlight - 1), trialSuccesses: successes };
  }
  return s;
}

/** Thrown instead of calling the function while the breaker refuses calls. */
export class BreakerOpenError extends Error {
  constructor(
    readonly breaker: string,
    readonly retryAfterMs: number,
  ) {
    super(`circuit breaker ${breaker} is open; retry in ${retryAfterMs} ms`);
    this.name = "BreakerOpenError";
  }
}

export interface CircuitBreakerOptions {
  readonly name: string;
  readonly config?: Partial<BreakerConfig>;
  /** Whether an error is a downstream failure (default: every error is). */
  readonly isFailure?: (err: unknown) => boolean;
  readonly now?: () => number;
  readonly onPhaseChange?: (phase: BreakerPhase) => void;
}

export class CircuitBreaker {
  readonly name: string;
  readonly config: BreakerConfig;
  #state = initialBreakerState();
  readonly #isFailure: (err: unknown) => boolean;
  readonly #now: () => number;
  readonly #onPhaseChange: ((phase: BreakerPhase) => void) | undefined;

  constructor(opts: CircuitBreakerOptions) {
    this.name = opts.name;
    this.config = { ...defaultBreakerConfig, ...opts.config };
    this.#isFailure = opts.isFailure ?? (() => true);
    this.#now = opts.now ?? Date.now;
    this.#onPhaseChange = opts.onPhaseChange;
  }

  get phase(): BreakerPhase {
    return this.#state.phase;
  }

  get state(): BreakerState {
    return this.#state;
  }

  async execute<T>(fn: () => Promise<T>): Promise<T> {
    const admit = breakerAdmit(this.#state, this.#now(), this.config);
    this.#set(admit.state);
    if (!admit.admitted) throw new BreakerOpenError(this.name, admit.retryAfterMs);
    try {
      const result = await fn();
      this.#set(breakerRecord(this.#state, admit.ticket, "success", this.#now(), this.config));
      return result;
    } catch (err) {
      const outcome = this.#isFailure(err) ? "failure" : "success";
      this.#set(breakerRecord(this.#state, admit.ticket, outcome, this.#now(), this.config));
      throw err;
    }
  }

  #set(next: BreakerState): void {
    const before = this.#state.phase;
    this.#state = next;
    if (next.phase !== before) this.#onPhaseChange?.(next.phase);
  }
}
