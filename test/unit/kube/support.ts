// Helpers for KubeClient's transport tests: a KubeConfig for a plain-HTTP server on loopback.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";

/** A KubeConfig pointing at `server` (listening on 127.0.0.1) with a dummy token. */
export function loopbackKubeConfig(server: Server): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true },
    ],
    users: [{ name: "u", token: "t" }],
    contexts: [{ name: "c", cluster: "c", user: "u" }],
    currentContext: "c",
  });
  return kc;
}
