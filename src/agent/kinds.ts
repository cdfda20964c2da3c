// The controller kinds this agent runs: one line per kind. Each runs on the shared runtime with
// its own stream, cursor, circuit breaker, queue and resync (src/agent/README.md: adding a kind).
// Deployments and sentinels are registered together: the region's autoscaler reads the sentinels'
// measurements and sizes a settled environment's ReplicaSet through the deployment kind's render.
import { RegionAutoscaler } from "./autoscale/autoscaler.js";
import { buildsController, type BuildEnv } from "./builds/controller.js";
import { deploymentsController, type DeploymentEnv } from "./deployments/controller.js";
import { gatewaysController } from "./gateways/controller.js";
import { jobsController } from "./jobs/controller.js";
import { releasesController } from "./releases/controller.js";
import type { SecretStoreEnv } from "./deployments/secret-store.js";
import type { GatewayEnv } from "./gateways/settings.js";
import { kind, optionalKind, type KindEnv, type KindRegistration } from "./runtime/kind.js";
import { sentinelsController } from "./sentinels/controller.js";
import type { SentinelEnv } from "./sentinels/settings.js";

/** What the agent gives its kinds: the runtime's KindEnv and each kind's own settings. */
export type AgentKindEnv = KindEnv & SentinelEnv & SecretStoreEnv & GatewayEnv & DeploymentEnv & BuildEnv;

/** The deployment and sentinel kinds, sharing the region's autoscaler. */
const autoscaled: KindRegistration<AgentKindEnv> = (manager, env, opts) => {
  const autoscaler = new RegionAutoscaler({
    region: env.region,
    send: (req, signal) => env.ctrl.reportAutoscale(req, { signal, timeoutMs: 5_000 }),
    intervalMs: env.sentinel.autoscaleIntervalMs,
    registry: env.sentinel.registry,
  });
  manager.add(deploymentsController(env, autoscaler), opts);
  manager.add(sentinelsController(env, autoscaler), opts);
};

export const KINDS: readonly KindRegistration<AgentKindEnv>[] = [
  autoscaled,
  kind(jobsController),
  kind(releasesController),
  optionalKind(gatewaysController),
  optionalKind(buildsController),
];
