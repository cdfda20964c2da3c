// Every kind's payloads, by the kind's name (the outbox and stream kind, stored in every row:
// never renamed). This is the one list of streamed kinds: what the layers below the kind
// descriptors need of them — their names (a region gets a stream counter per kind, in this
// order) and how to delete any kind's object from its stored Apply (deleting an environment).
// The descriptors (../kinds/registry.ts) are keyed by the same names, so the compiler wants one
// for each kind here, and none more.
import type { KindName } from "../db/schema.js";
import { buildPayloads } from "./build.js";
import { deploymentPayloads } from "./deployment.js";
import { gatewayPayloads } from "./gateway.js";
import { jobPayloads } from "./job.js";
import type { KindPayloads } from "./kind.js";
import { releasePayloads } from "./release.js";
import { sentinelPayloads } from "./sentinel.js";

export const KIND_PAYLOADS = {
  deployment: deploymentPayloads,
  sentinel: sentinelPayloads,
  release: releasePayloads,
  job: jobPayloads,
  gateway: gatewayPayloads,
  build: buildPayloads,
} as const satisfies Readonly<Record<KindName, KindPayloads>>;

/** The name of a kind this ctrl streams. */
export type StreamedKind = keyof typeof KIND_PAYLOADS;

export const KIND_NAMES: readonly StreamedKind[] = Object.keys(KIND_PAYLOADS) as StreamedKind[];

/** A kind's payloads by name (undefined: not a kind this ctrl streams). */
export function payloadsOf(name: string): KindPayloads | undefined {
  return Object.hasOwn(KIND_PAYLOADS, name) ? KIND_PAYLOADS[name as StreamedKind] : undefined;
}
