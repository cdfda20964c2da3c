// The controller kinds this agent runs: one line per kind. Each runs on the shared runtime with
// its own stream, cursor, circuit breaker, queue and resync (src/agent/README.md: adding a kind).
import { deploymentsController } from "./deployments/controller.js";
import { gatewaysController } from "./gateways/controller.js";
import { jobsController } from "./jobs/controller.js";
import { releasesController } from "./releases/controller.js";
import { kind, optionalKind, type KindRegistration } from "./runtime/kind.js";
import { sentinelsController } from "./sentinels/controller.js";

export const KINDS: readonly KindRegistration[] = [
  kind(deploymentsController),
  kind(sentinelsController),
  kind(jobsController),
  kind(releasesController),
  optionalKind(gatewaysController),
];
