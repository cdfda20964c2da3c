// What the agent's shared caches keep of a resource, as the real kinds declare it (each kind's
// builder: readsStatus, trim), merged the way the agent's manager merges them. Unit tests of what a
// cache holds read it here, so they check the kinds' own declarations.
import { createCtrlClient } from "../../src/agent/ctrl-client.js";
import { deploymentsController } from "../../src/agent/deployments/controller.js";
import { gatewaysController } from "../../src/agent/gateways/controller.js";
import { jobsController } from "../../src/agent/jobs/controller.js";
import { releasesController } from "../../src/agent/releases/controller.js";
import type { AgentKindEnv } from "../../src/agent/kinds.js";
import { SharedShape, type Trim } from "../../src/agent/runtime/trim.js";
import { sentinelsController } from "../../src/agent/sentinels/controller.js";
import type { ResourceType } from "../../src/kube/resources.js";

const env: AgentKindEnv = {
  region: "eu",
  // Never called: declarations only.
  ctrl: createCtrlClient("http://127.0.0.1:9", "unused"),
  sentinel: { image: "krane:test", measureIntervalMs: 0 },
  secretStore: { provider: "vault", parameters: {} },
  gateway: {
    public: { namespace: "gw", name: "public", sectionName: "http" },
    certificateIssuer: { kind: "ClusterIssuer", name: "ca" },
    https: { className: "traefik", port: 8443 },
    removeSecurityPolicies: true,
  },
};

/** The transform the agent's cache of `r` (in all namespaces, or `namespace`) applies. */
export function cachedBy(r: ResourceType, namespace?: string): Trim {
  const shared = new SharedShape(r.plural);
  const decls = [
    deploymentsController(env),
    sentinelsController(env),
    jobsController(env),
    releasesController(env),
    gatewaysController(env),
  ];
  for (const d of decls)
    for (const w of d?.watches ?? []) if (w.resource === r && w.namespace === namespace) shared.add(w.shape);
  return shared.transform();
}
