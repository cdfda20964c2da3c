// Copies the agent's RBAC (deploy/rbac/agent.yaml, the one source of truth) into the Helm chart
// (deploy/helm/krane/files/agent-rbac.yaml), which renders exactly those objects. Helm reads
// only files inside the chart, so the chart carries a copy; test/unit/deploy/chart.test.ts
// fails while the two differ. Run after changing agent.yaml:  node scripts/sync-chart-rbac.mjs
import { copyFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const from = fileURLToPath(new URL("../deploy/rbac/agent.yaml", import.meta.url));
const to = fileURLToPath(new URL("../deploy/helm/krane/files/agent-rbac.yaml", import.meta.url));
copyFileSync(from, to);
console.error(`copied ${from} to ${to}`);
