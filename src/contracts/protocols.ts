// What an app speaks on its port (`krane deploy --protocol`), and how that is written where
// Kubernetes, the Gateway and the sentinel read it: the port's `appProtocol`. "h2c" and "grpc"
// are both HTTP/2 without TLS (prior knowledge) on the wire, so both are `kubernetes.io/h2c`
// (the standard name Gateway implementations read to speak h2c to a backend); "grpc" only says
// more to the user. "http1" leaves appProtocol unset (HTTP/1.1, as before the field existed).

export const APP_PROTOCOLS = ["http1", "h2c", "grpc"] as const;
export type AppProtocol = (typeof APP_PROTOCOLS)[number];
export const DEFAULT_APP_PROTOCOL: AppProtocol = "http1";

/** Kubernetes' appProtocol for HTTP/2 over cleartext (KEP-3726). */
export const APP_PROTOCOL_H2C = "kubernetes.io/h2c";

export function isAppProtocol(v: string): v is AppProtocol {
  return (APP_PROTOCOLS as readonly string[]).includes(v);
}

/** The port's appProtocol for an app protocol (undefined: plain HTTP/1.1, left unset). */
export function appProtocolOf(p: AppProtocol): string | undefined {
  return p === "http1" ? undefined : APP_PROTOCOL_H2C;
}

/** A payload's protocol field as an app protocol: empty or unknown (an older ctrl) is "http1". */
export function appProtocolFrom(v: string): AppProtocol {
  return isAppProtocol(v) ? v : DEFAULT_APP_PROTOCOL;
}

/**
 * A label of a revision's pods (absent: "http1"): what the app speaks, for the agent that renders
 * the routing table's EndpointSlices from its pod cache (their port's appProtocol). A label, not
 * an annotation: the cache keeps a pod's labels only (src/agent/runtime/trim.ts).
 */
export const LABEL_APP_PROTOCOL = "krane.dev/app-protocol";
