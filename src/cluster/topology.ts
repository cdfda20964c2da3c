// What a local cluster contains besides its control plane: the simulated nodes (zones and node
// pools, so placement rules really decide where pods go), the gVisor RuntimeClass and the
// CiliumNetworkPolicy CRD. Pure data: cluster.ts creates these objects.

import { NODE_CLASS_LABEL, ZONE_LABEL } from "../contracts/cluster.js";

export const ZONES = ["zone-a", "zone-b", "zone-c"] as const;

export type NodePool = "untrusted" | "sentinel" | "general";

export interface NodePlan {
  /** Nodes per zone in each pool. */
  untrusted: number;
  sentinel: number;
  general: number;
}

export const DEFAULT_NODE_PLAN: NodePlan = { untrusted: 2, sentinel: 1, general: 1 };

export interface NodeObject {
  apiVersion: "v1";
  kind: "Node";
  metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> };
  spec: { taints?: { key: string; value: string; effect: "NoSchedule" }[]; podCIDR?: string; podCIDRs?: string[] };
  status: {
    capacity: Record<string, string>;
    allocatable: Record<string, string>;
    nodeInfo: Record<string, string>;
  };
}

/** Nodes in a plan. */
export function nodeCount(plan: NodePlan = DEFAULT_NODE_PLAN): number {
  return (plan.untrusted + plan.sentinel + plan.general) * ZONES.length;
}

/**
 * The nodes of a cluster: every pool in every zone; pools other than general are tainted. With
 * `podCidrs` (one per node, in order) each node gets its own pod range, which KWOK allocates from.
 */
export function renderNodes(plan: NodePlan = DEFAULT_NODE_PLAN, podCidrs?: readonly string[]): NodeObject[] {
  const nodes: NodeObject[] = [];
  const pools: NodePool[] = ["untrusted", "sentinel", "general"];
  for (const pool of pools) {
    for (const zone of ZONES) {
      for (let i = 1; i <= plan[pool]; i++) {
        const name = `${pool}-${zone.replace("zone-", "")}-${i}`;
        const resources = { cpu: "32", memory: "128Gi", pods: "1000", "ephemeral-storage": "500Gi" };
        nodes.push({
          apiVersion: "v1",
          kind: "Node",
          metadata: {
            name,
            labels: {
              "kubernetes.io/hostname": name,
              "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "kwok",
              "topology.kubernetes.io/region": "local",
              [ZONE_LABEL]: zone,
              [NODE_CLASS_LABEL]: pool,
              type: "kwok",
            },
            // KWOK manages these nodes (it runs with --manage-all-nodes; the annotation says so to a reader).
            annotations: { "kwok.x-k8s.io/node": "fake" },
          },
          spec: {
            ...(pool === "general" ? {} : { taints: [{ key: NODE_CLASS_LABEL, value: pool, effect: "NoSchedule" as const }] }),
            ...(podCidrs?.[nodes.length] ? { podCIDR: podCidrs[nodes.length], podCIDRs: [podCidrs[nodes.length] as string] } : {}),
          },
          status: {
            capacity: resources,
            allocatable: resources,
            nodeInfo: { architecture: "amd64", operatingSystem: "linux", kubeletVersion: "fake", containerRuntimeVersion: "kwok" },
          },
        });
      }
    }
  }
  return nodes;
}

/** The sandboxed runtime user workloads run with (a name only here: KWOK runs no containers). */
export const gvisorRuntimeClass = {
  apiVersion: "node.k8s.io/v1",
  kind: "RuntimeClass",
  metadata: { name: "gvisor" },
  handler: "runsc",
};

const labelSelectorSchema = {
  type: "object",
  properties: {
    matchLabels: { type: "object", additionalProperties: { type: "string" } },
    matchExpressions: {
      type: "array",
      items: {
        type: "object",
        required: ["key", "operator"],
        properties: {
          key: { type: "string" },
          operator: { type: "string", enum: ["In", "NotIn", "Exists", "DoesNotExist"] },
          values: { type: "array", items: { type: "string" } },
        },
      },
    },
  },
};

const portRuleSchema = {
  type: "array",
  items: {
    type: "object",
    properties: {
      ports: {
        type: "array",
        items: {
          type: "object",
          required: ["port"],
          properties: {
            port: { type: "string" },
            endPort: { type: "integer" },
            protocol: { type: "string", enum: ["TCP", "UDP", "SCTP", "ICMP", "ICMPv6", "ANY"] },
          },
        },
      },
    },
  },
};

const ruleSchema = {
  type: "object",
  properties: {
    endpointSelector: labelSelectorSchema,
    nodeSelector: labelSelectorSchema,
    description: { type: "string" },
    ingress: {
      type: "array",
      items: {
        type: "object",
        properties: {
          fromEndpoints: { type: "array", items: labelSelectorSchema },
          fromEntities: { type: "array", items: { type: "string" } },
          fromCIDR: { type: "array", items: { type: "string" } },
          toPorts: portRuleSchema,
        },
      },
    },
    ingressDeny: { type: "array", items: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
    egress: {
      type: "array",
      items: {
        type: "object",
        properties: {
          toEndpoints: { type: "array", items: labelSelectorSchema },
          toEntities: { type: "array", items: { type: "string" } },
          toCIDR: { type: "array", items: { type: "string" } },
          toFQDNs: {
            type: "array",
            items: { type: "object", properties: { matchName: { type: "string" }, matchPattern: { type: "string" } } },
          },
          toPorts: portRuleSchema,
        },
      },
    },
    egressDeny: { type: "array", items: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
    labels: {
      type: "array",
      items: { type: "object", properties: { key: { type: "string" }, value: { type: "string" }, source: { type: "string" } } },
    },
  },
};

/**
 * CiliumNetworkPolicy (cilium.io/v2) with a structural schema for the fields krane and common
 * policies use; Cilium itself is not installed (KWOK runs no datapath), the API contract is.
 */
export const ciliumNetworkPolicyCrd = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "ciliumnetworkpolicies.cilium.io" },
  spec: {
    group: "cilium.io",
    scope: "Namespaced",
    names: {
      kind: "CiliumNetworkPolicy",
      listKind: "CiliumNetworkPolicyList",
      plural: "ciliumnetworkpolicies",
      singular: "ciliumnetworkpolicy",
      shortNames: ["cnp", "ciliumnp"],
      categories: ["cilium", "ciliumpolicy"],
    },
    versions: [
      {
        name: "v2",
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: "object",
            required: ["metadata"],
            properties: {
              apiVersion: { type: "string" },
              kind: { type: "string" },
              metadata: { type: "object" },
              spec: ruleSchema,
              specs: { type: "array", items: ruleSchema },
              status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
            },
          },
        },
      },
    ],
  },
};
