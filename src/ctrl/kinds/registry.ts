// Every kind ctrl streams to agents, in one list. A new kind is its own file in this folder
// (descriptor, payload encoding, report validation and recording; see ./kind.ts) plus one line
// here; ClusterService, the outbox, the streams and the region counters pick it up from the list.
import type { KindName } from "../db/schema.js";
import { deploymentKind } from "./deployment.js";
import { jobKind } from "./job.js";
import { gatewayKind } from "./gateway.js";
import type { Kind } from "./kind.js";
import { releaseKind } from "./release.js";
import { sentinelKind } from "./sentinel.js";

export const KINDS: readonly Kind[] = [deploymentKind, sentinelKind, releaseKind, jobKind, gatewayKind];

export const KIND_NAMES: readonly KindName[] = KINDS.map((k) => k.name);
