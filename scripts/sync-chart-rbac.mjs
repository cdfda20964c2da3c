// Copies what the chart packages from deploy/rbac/ (the one source of truth) into the Helm chart's
// files/: the agent's RBAC (agent.yaml), the sentinel's (sentinel.yaml) and the agent's admission
// fence (fence.yaml), which the chart renders exactly. Helm reads only files inside the chart,
// so the chart carries copies; test/unit/deploy/chart.test.ts fails while they differ. Run after
// changing any of them:  node scripts/sync-chart-rbac.mjs
import { copyFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

for (const [from, to] of [
  ["agent.yaml", "agent-rbac.yaml"],
  ["sentinel.yaml", "sentinel-rbac.yaml"],
  ["fence.yaml", "fence.yaml"],
]) {
  const src = fileURLToPath(new URL(`../deploy/rbac/${from}`, import.meta.url));
  const dst = fileURLToPath(new URL(`../deploy/helm/krane/files/${to}`, import.meta.url));
  copyFileSync(src, dst);
  console.error(`copied ${src} to ${dst}`);
}
