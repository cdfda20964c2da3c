// Kubernetes feature gates the local cluster turns on, on the API server and every kubelet alike
// (a gate on one side only is refused by the other).
// - PodLogsQuerySplitStreams (alpha since 1.32, still alpha and off by default in 1.36): pods/log
//   reads stdout or stderr alone (`stream=Stdout|Stderr`), so the agent keeps each line's stream
//   (src/agent/logs/streams.ts finds out whether a cluster has it; other clusters read merged).
export const FEATURE_GATES: Readonly<Record<string, boolean>> = { PodLogsQuerySplitStreams: true };

/** The gates as a `--feature-gates` value. */
export function featureGatesFlag(): string {
  return Object.entries(FEATURE_GATES)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}
