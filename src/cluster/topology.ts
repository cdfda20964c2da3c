// What a local cluster contains besides its control plane: the simulated nodes (zones and node
// pools, so placement rules really decide where pods go), the gVisor RuntimeClass and the
// CiliumNetworkPolicy CRD. Pure data: cluster.ts creates these objects. A plan can be sized for
// a number of pods (planForPods), so a benchmark or a big dev cluster asks for capacity, not
// for node counts.

import { NODE_CLASS_LABEL, ZONE_LABEL, type NodeClass } from "../contracts/cluster.js";
import { nodePodCidrSize } from "./pod-network.js";

export const ZONES = ["zone-a", "zone-b", "zone-c"] as const;

export type NodePool = NodeClass | "general";

/** What one simulated node offers the scheduler (capacity = allocatable). */
export interface NodeCapacity {
  /** Cores. */
  cpu: number;
  memoryGi: number;
  pods: number;
}

export const DEFAULT_NODE_CAPACITY: NodeCapacity = { cpu: 32, memoryGi: 128, pods: 1000 };

export interface NodePlan {
  /** Nodes per zone in each pool. */
  untrusted: number;
  sentinel: number;
  general: number;
  /** Per-node capacity of a pool (default DEFAULT_NODE_CAPACITY). */
  capacity?: Partial<Record<NodePool, NodeCapacity>>;
}

export const DEFAULT_NODE_PLAN: NodePlan = { untrusted: 2, sentinel: 1, general: 1 };

/**
 * Addresses of a node's pod CIDR kept free of pods. KWOK hands out pod IPs from the node's range
 * without checking its end, so the pods a node admits must stay below its range's size.
 */
const RESERVED_POD_ADDRESSES = 2;

/** Capacity planned above what the pods request, so the scheduler never packs a node to the last byte. */
const HEADROOM = 1.25;

/**
 * The smallest change to `base` whose untrusted pool holds `pods` pods requesting
 * `cpuMillicores` and `memoryMib` each: the untrusted nodes get the allocatable the pods need
 * (with 25 % headroom, never less than the default), and more nodes per zone are added only when
 * one node's pod CIDR could not address its share. Throws when the pods do not fit one /16.
 */
export function planForPods(
  pods: number,
  request: { cpuMillicores: number; memoryMib: number },
  base: NodePlan = DEFAULT_NODE_PLAN,
): NodePlan {
  if (!Number.isInteger(pods) || pods < 0)
    throw new Error(`planForPods: pods must be a non-negative integer, got ${pods}`);
  const def = base.capacity?.untrusted ?? DEFAULT_NODE_CAPACITY;
  for (let perZone = Math.max(1, base.untrusted); ; perZone++) {
    const plan: NodePlan = { ...base, untrusted: perZone };
    const untrustedNodes = perZone * ZONES.length;
    const total = nodeCount(plan);
    if (total > 256) throw new Error(`${pods} pods do not fit one cluster's /16 pod network`);
    const addressable = nodePodCidrSize(total) - RESERVED_POD_ADDRESSES;
    const perNode = Math.ceil((pods * HEADROOM) / untrustedNodes);
    if (perNode > addressable) continue;
    const capacity: NodeCapacity = {
      cpu: Math.max(def.cpu, Math.ceil((perNode * request.cpuMillicores) / 1000)),
      memoryGi: Math.max(def.memoryGi, Math.ceil((perNode * request.memoryMib) / 1024)),
      pods: Math.min(addressable, Math.max(def.pods, perNode)),
    };
    return { ...plan, capacity: { ...base.capacity, untrusted: capacity } };
  }
}

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
        const cap = plan.capacity?.[pool] ?? DEFAULT_NODE_CAPACITY;
        const resources = {
          cpu: String(cap.cpu),
          memory: `${cap.memoryGi}Gi`,
          pods: String(cap.pods),
          "ephemeral-storage": "500Gi",
        };
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
            ...(pool === "general"
              ? {}
              : { taints: [{ key: NODE_CLASS_LABEL, value: pool, effect: "NoSchedule" as const }] }),
            ...(podCidrs?.[nodes.length]
              ? { podCIDR: podCidrs[nodes.length], podCIDRs: [podCidrs[nodes.length] as string] }
              : {}),
          },
          status: {
            capacity: resources,
            allocatable: resources,
            nodeInfo: {
              architecture: "amd64",
              operatingSystem: "linux",
              kubeletVersion: "fake",
              containerRuntimeVersion: "kwok",
            },
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
      items: {
        type: "object",
        properties: { key: { type: "string" }, value: { type: "string" }, source: { type: "string" } },
      },
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
