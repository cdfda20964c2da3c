// The environment's edge policies at the sentinel (the routing document's `policies`,
// src/contracts/edge-policy.ts): compiled once per document, checked in order at admission before
// an instance is picked, so a refused request never reaches the app. Every decision of every
// policy is counted in krane_sentinel_policy_decisions_total{policy,decision}.
import type { Counter } from "prom-client";
import {
  compileEdgePolicy,
  type CompiledPolicy,
  type EdgePolicy,
  type EdgeRequest,
  type Refusal,
} from "../contracts/edge-policy.js";
import { REQUEST_ID_HEADER } from "../contracts/headers.js";
import { ERROR_HEADER } from "./errors.js";

interface Entry {
  readonly policy: CompiledPolicy;
  readonly allowed: { inc(): void };
  readonly denied: { inc(): void };
}

/** A refusal as the sentinel's own answer (the shape of request-path.ts's OwnAnswer). */
export function refusalAnswer(
  r: Refusal,
  requestId: string,
  closeConnection: boolean,
): { status: number; headers: Record<string, string>; body: string; closeConnection: boolean } {
  const body = `${r.message}\n`;
  return {
    status: r.status,
    headers: {
      ...r.headers,
      "content-type": "text/plain; charset=utf-8",
      "content-length": String(Buffer.byteLength(body)),
      "cache-control": "no-store",
      [ERROR_HEADER]: r.cause,
      [REQUEST_ID_HEADER]: requestId,
    },
    body,
    closeConnection,
  };
}

export class EdgePolicies {
  readonly #decisions: Counter<"policy" | "decision">;
  #list: readonly Entry[] = [];
  #source: readonly EdgePolicy[] | undefined;

  constructor(decisions: Counter<"policy" | "decision">) {
    this.#decisions = decisions;
  }

  get active(): boolean {
    return this.#list.length > 0;
  }

  /** The document's list (undefined: none). Recompiled only when the list object changed. */
  set(list: readonly EdgePolicy[] | undefined): void {
    if (list === this.#source) return;
    this.#source = list;
    this.#list = (list ?? []).map((p) => ({
      policy: compileEdgePolicy(p),
      allowed: this.#decisions.labels({ policy: p.name, decision: "allow" }),
      denied: this.#decisions.labels({ policy: p.name, decision: "deny" }),
    }));
  }

  /** The first refusal, each decision counted; undefined when every policy lets the request pass. */
  check(r: EdgeRequest): Refusal | undefined {
    for (const e of this.#list) {
      const refusal = e.policy.decide(r);
      if (refusal) {
        e.denied.inc();
        return refusal;
      }
      e.allowed.inc();
    }
    return undefined;
  }
}
