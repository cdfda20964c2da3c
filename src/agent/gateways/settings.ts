// The gateway kind's settings: the cluster's Gateways and how endpoints are exposed through them.
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

/** What the gateway kind is built with beside the runtime's KindEnv. */
export interface GatewayEnv {
  /** Exposure through the cluster's Gateways (absent: this cluster exposes nothing). */
  readonly gateway?: GatewaySettings;
}
