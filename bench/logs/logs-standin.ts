// A stand-in for the few Kubernetes API paths the agent's log path reads (`npm run bench -- logs`,
// its first part): a workspace namespace, a list of N running pods, a pod watch that stays quiet,
// and each pod's `pods/log?follow&timestamps`, answered over HTTPS like kube-apiserver does it:
// chunked, each line written (and so flushed) on its own, with the kubelet's RFC 3339 timestamp
// with nanoseconds. Every pod writes RATE numbered lines a second, in bursts every 50 ms, each
// with the time it was written, like the real part's workload. It runs in a process of its own,
// so the agent's CPU is measured alone. Not a test double: it only feeds the benchmark, which
// also measures the same path on real nodes.
//
//   node --import tsx bench/logs/logs-standin.ts <port> <cert> <key> <instances> <rate> <namespace>
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import {
  COMPONENT,
  LABEL_COMPONENT,
  LABEL_DEPLOYMENT_ID,
  workspaceNamespaceLabels,
} from "../../src/contracts/labels.js";

const [port, cert, key, instances, rate, namespace] = process.argv.slice(2);
const N = Number(instances);
const PER_BURST = Math.max(1, Math.round(Number(rate) / 20));
const DEPLOYMENT = "dep_bench";

const pods = Array.from({ length: N }, (_, i) => `web-${String(i).padStart(3, "0")}`);

function pod(name: string): Record<string, unknown> {
  return {
    metadata: {
      name,
      namespace,
      labels: { [LABEL_COMPONENT]: COMPONENT.deployment, [LABEL_DEPLOYMENT_ID]: DEPLOYMENT },
    },
    status: {
      phase: "Running",
      containerStatuses: [{ name: "app", containerID: `containerd://${name}`, state: { running: {} } }],
    },
  };
}

/** RFC 3339 with nine fractional digits, as the kubelet stamps lines: in order per pod. */
function stamp(ms: number, n: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 19)}.${iso.slice(20, 23)}${String(n % 1e6).padStart(6, "0")}Z`;
}

// HTTP/1.1 and HTTP/2 (ALPN), as kube-apiserver serves both.
const server = http2.createSecureServer(
  { cert: readFileSync(cert ?? ""), key: readFileSync(key ?? ""), allowHTTP1: true },
  (req, res) => {
    const url = new URL(req.url ?? "/", "https://x");
    const parts = url.pathname.split("/").filter(Boolean);
    const json = (o: unknown): void => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(o));
    };
    // /api/v1/namespaces/<ns>[/pods[/<pod>/log]]
    if (parts.length === 4) {
      json({ metadata: { name: parts[3], labels: workspaceNamespaceLabels("ws_bench") } });
      return;
    }
    if (parts.length === 5 && parts[4] === "pods") {
      if (url.searchParams.get("watch") === "true") {
        res.writeHead(200, { "content-type": "application/json" });
        res.write("");
        return; // quiet until the reader leaves
      }
      json({ metadata: { resourceVersion: "1" }, items: pods.map(pod) });
      return;
    }
    if (parts.length === 7 && parts[6] === "log") {
      const name = parts[5] ?? "";
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("");
      let n = 0;
      const t = setInterval(() => {
        for (let i = 0; i < PER_BURST; i++) {
          n++;
          const now = Date.now();
          res.write(`${stamp(now, n)} seq=${n} pod=${name} t=${now}\n`);
        }
      }, 50);
      res.on("close", () => clearInterval(t));
      return;
    }
    res.writeHead(404).end();
  },
);
server.listen(Number(port), "127.0.0.1", () => process.send?.("ready"));
process.on("SIGTERM", () => process.exit(0));
