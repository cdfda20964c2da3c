// Every kind ctrl streams to agents: its descriptor, keyed by the kind's name in the payload
// registry (../payloads/registry.ts), so the compiler wants a descriptor for every kind there and
// none more. A new kind is its descriptor here (stream and report rules; see ./kind.ts), its
// payloads in ../payloads, and one line in each registry; ClusterService, the outbox, the streams
// and the region counters pick it up from them.
import type { StreamedKind } from "../payloads/registry.js";
import { buildKind } from "./build.js";
import { deploymentKind } from "./deployment.js";
import { gatewayKind } from "./gateway.js";
import { jobKind } from "./job.js";
import type { Kind } from "./kind.js";
import { releaseKind } from "./release.js";
import { sentinelKind } from "./sentinel.js";

const BY_NAME: { readonly [K in StreamedKind]: Kind } = {
  deployment: deploymentKind,
  sentinel: sentinelKind,
  release: releaseKind,
  job: jobKind,
  gateway: gatewayKind,
  build: buildKind,
};

export const KINDS: readonly Kind[] = Object.values(BY_NAME);

export const KIND_NAMES: readonly StreamedKind[] = Object.keys(BY_NAME) as StreamedKind[];
