// Every kind ctrl streams to agents, in one list. A new kind is its own file in this folder
// (descriptor and report validation; see ./kind.ts), its payloads in ../payloads (listed in
// ../payloads/registry.ts, in the same order), and one line here; ClusterService, the outbox, the
// streams and the region counters pick it up from the lists.
import type { KindName } from "../db/schema.js";
import { KIND_PAYLOADS } from "../payloads/registry.js";
import { deploymentKind } from "./deployment.js";
import { gatewayKind } from "./gateway.js";
import { jobKind } from "./job.js";
import type { Kind } from "./kind.js";
import { releaseKind } from "./release.js";
import { sentinelKind } from "./sentinel.js";

export const KINDS: readonly Kind[] = [deploymentKind, sentinelKind, releaseKind, jobKind, gatewayKind];

export const KIND_NAMES: readonly KindName[] = KINDS.map((k) => k.name);

// The layers below the descriptors know the kinds by their payloads: the two lists must agree.
if (KIND_NAMES.join() !== KIND_PAYLOADS.map((k) => k.name).join())
  throw new Error(`the kind registry (${KIND_NAMES.join()}) and the payload registry disagree`);
