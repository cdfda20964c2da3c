// Every kind's payloads, in the order of the kind registry (../kinds/registry.ts, which checks the
// two lists agree): what the layers below the kind descriptors need of the kinds — their names
// (a region gets a stream counter per kind) and how to delete any kind's object from its stored
// Apply (deleting an environment).
import type { KindName } from "../db/schema.js";
import { deploymentPayloads } from "./deployment.js";
import { gatewayPayloads } from "./gateway.js";
import { jobPayloads } from "./job.js";
import type { KindPayloads } from "./kind.js";
import { releasePayloads } from "./release.js";
import { sentinelPayloads } from "./sentinel.js";

export const KIND_PAYLOADS: readonly KindPayloads[] = [
  deploymentPayloads,
  sentinelPayloads,
  releasePayloads,
  jobPayloads,
  gatewayPayloads,
];

export const KIND_NAMES: readonly KindName[] = KIND_PAYLOADS.map((k) => k.name);

/** A kind's payloads by name (undefined: not a kind this ctrl streams). */
export function payloadsOf(name: string): KindPayloads | undefined {
  return KIND_PAYLOADS.find((k) => k.name === name);
}
