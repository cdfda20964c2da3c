// The kubelet alone, for the benches that compare krane against it (bench/nodes.ts,
// bench/autoscale/autoscale.ts): a namespace for bare Pods, and the bare Pod that stands for a deployment's
// pod (the hello app with the same limits and probe, posted straight to the untrusted real node).
import { kubeRequest, type KubeEndpoint } from "../src/cluster/kube-http.js";
import { until } from "./support.js";

/** Creates `ns` and waits for its default ServiceAccount (a Pod cannot be created before it). */
export async function bareNamespace(ep: KubeEndpoint, ns: string): Promise<void> {
  await kubeRequest(ep, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await until(
    "the default ServiceAccount",
    async () => (await kubeRequest(ep, "GET", `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200,
    60_000,
    100,
  );
}

/** Half of a CPU quantity in millicores ("100m" → "50m", "1" → "500m"). */
function halfCpu(cpu: string): string {
  const m = cpu.endsWith("m") ? Number(cpu.slice(0, -1)) : Number(cpu) * 1000;
  return `${Math.max(1, Math.floor(m / 2))}m`;
}

/** A bare Pod's spec like a deployment's: `runtimeClassName` "gvisor" as krane's, or none (runc). */
export function barePodSpec(
  image: string,
  runtimeClassName: string | undefined,
  cpu = "100m",
): Record<string, unknown> {
  return {
    ...(runtimeClassName ? { runtimeClassName } : {}),
    nodeName: "untrusted-real",
    automountServiceAccountToken: false,
    tolerations: [{ key: "node-class", operator: "Equal", value: "untrusted", effect: "NoSchedule" }],
    containers: [
      {
        name: "app",
        image,
        ports: [{ containerPort: 8080 }],
        // Requests half the limits, as a deployment's pods (render.ts: REQUEST_DIVISOR): Burstable,
        // so the startup CPU boost can raise the CPU limit alone.
        resources: { limits: { cpu, memory: "128Mi" }, requests: { cpu: halfCpu(cpu), memory: "64Mi" } },
        readinessProbe: { httpGet: { path: "/healthz", port: 8080 }, periodSeconds: 1, timeoutSeconds: 2 },
      },
    ],
  };
}
