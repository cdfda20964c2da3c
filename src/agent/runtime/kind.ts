// What a controller kind is built from, and the shape of its registration. A kind folder
// exports one factory `(env) => ControllerDeclaration`; src/agent/kinds.ts lists them with kind().
import type { Client } from "@connectrpc/connect";
import type { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { Registry } from "prom-client";
import type { AddressMapping } from "../../contracts/address-map.js";
import type { ControllerDeclaration } from "./builder.js";
import type { ControllerOptions } from "./core.js";
import type { Manager } from "./manager.js";

export type ClusterClient = Client<typeof ClusterService>;

/** The agent's settings for sentinels whose environment names no image of its own. */
export interface SentinelDefaults {
  /** krane's image, run as `krane sentinel`. */
  readonly image: string;
  /** How often the sentinels' pods are asked what they serve (default 5 s). */
  readonly observeIntervalMs?: number;
  /** Local cluster only: where pod IPs are served on this machine (src/contracts/address-map.ts). */
  readonly podAddressMap?: AddressMapping;
  /** How often the sentinels' metrics are collected for rollout analysis (default 10 s; 0: never). */
  readonly measureIntervalMs?: number;
  /** The agent's metrics registry (the collector's scrape and report counters). */
  readonly registry?: Registry;
  /** How often the region's autoscaler decides (default 2 s; src/agent/autoscale). */
  readonly autoscaleIntervalMs?: number;
}

/** A Gateway of the cluster's platform (Gateway API): where a visibility's routes attach. */
export interface GatewayRef {
  readonly namespace: string;
  readonly name: string;
  /** A listener of the Gateway (empty: any that accepts the route). */
  readonly sectionName: string;
}

/** The agent's exposure settings (the gateway kind runs only when a Gateway is configured). */
export interface GatewaySettings {
  readonly public?: GatewayRef;
  readonly organization?: GatewayRef;
  /** cert-manager issuer of the Certificates (absent: none are rendered). */
  readonly certificateIssuer?: { readonly kind: "Issuer" | "ClusterIssuer"; readonly name: string };
  /** Also a Certificate per generated endpoint hostname (not only per custom domain). */
  readonly endpointCertificates?: boolean;
  /**
   * Serve the public routes' certificates: a Gateway per environment of this GatewayClass, with
   * an HTTPS listener on `port` per hostname that has a Certificate (absent: the Certificates are
   * issued but attached to nothing; src/agent/gateways/README.md says why this shape).
   */
  readonly https?: { readonly className: string; readonly port: number };
  /**
   * Delete the Envoy Gateway SecurityPolicies an earlier krane rendered (it renders none now: the
   * sentinel enforces the endpoint's JWT policy, src/agent/gateways/README.md).
   */
  readonly removeSecurityPolicies?: boolean;
}

/** What every kind is built from: the agent's region, its ctrl client and its settings. */
export interface KindEnv {
  readonly region: string;
  readonly ctrl: ClusterClient;
  /** What a sentinel runs when its environment names no image of its own. */
  readonly sentinel: SentinelDefaults;
  /** This cluster's Secrets Store CSI provider, for external secrets (absent: none). */
  readonly secretStore?: { readonly provider: string; readonly parameters: Readonly<Record<string, string>> };
  /** Exposure through the cluster's Gateways (absent: this cluster exposes nothing). */
  readonly gateway?: GatewaySettings;
}

/** A kind ready to be added to a manager (its message types stay inside). */
export type KindRegistration = (manager: Manager, env: KindEnv, opts: ControllerOptions) => void;

/** Wraps a kind's factory for the list in src/agent/kinds.ts. */
export function kind<Msg, D, Del, R>(
  factory: (env: KindEnv) => ControllerDeclaration<Msg, D, Del, R>,
): KindRegistration {
  return (manager, env, opts) => void manager.add(factory(env), opts);
}

/** Like kind(), for a kind that runs only when the agent's settings call for it (undefined: not added). */
export function optionalKind<Msg, D, Del, R>(
  factory: (env: KindEnv) => ControllerDeclaration<Msg, D, Del, R> | undefined,
): KindRegistration {
  return (manager, env, opts) => {
    const decl = factory(env);
    if (decl) manager.add(decl, opts);
  };
}

/** A key list of zero or one key (for `keysOf` of objects labelled with their key). */
export function oneKey(k: string | undefined): string[] {
  return k === undefined ? [] : [k];
}
