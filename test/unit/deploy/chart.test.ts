// The Helm chart stays in step with what it packages: the agent's and the sentinel's RBAC and
// the agent's fence are byte for byte deploy/rbac/'s, and the chart's version is the npm package's.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { parse } from "yaml";

const read = (rel: string): string => readFileSync(new URL(`../../../${rel}`, import.meta.url), "utf8");

describe("the Helm chart", () => {
  it("carries deploy/rbac/agent.yaml, sentinel.yaml and fence.yaml unchanged", () => {
    for (const [copy, original] of [
      ["agent-rbac.yaml", "agent.yaml"],
      ["sentinel-rbac.yaml", "sentinel.yaml"],
      ["fence.yaml", "fence.yaml"],
    ]) {
      assert.equal(
        read(`deploy/helm/krane/files/${copy}`),
        read(`deploy/rbac/${original}`),
        `deploy/helm/krane/files/${copy} differs from deploy/rbac/${original}: run node scripts/sync-chart-rbac.mjs`,
      );
    }
  });

  it("has the package's version", () => {
    const pkg = JSON.parse(read("package.json")) as { version: string };
    const chart = parse(read("deploy/helm/krane/Chart.yaml")) as { version: string; appVersion: string };
    assert.equal(chart.version, pkg.version);
    assert.equal(chart.appVersion, pkg.version);
  });

  it("documents every value in the schema and forbids unknown keys", () => {
    const schema = JSON.parse(read("deploy/helm/krane/values.schema.json")) as Schema;
    const values = parse(read("deploy/helm/krane/values.yaml")) as unknown;
    const walk = (v: unknown, s: Schema | undefined, path: string): void => {
      assert.ok(s, `${path} is in values.yaml but not in values.schema.json`);
      if (v === null || typeof v !== "object" || Array.isArray(v)) return;
      // Free-form maps (annotations, node selectors, affinity) take any key.
      if (s.properties === undefined) return;
      assert.equal(s.additionalProperties, false, `${path}: the schema must refuse unknown keys (typos)`);
      for (const [k, child] of Object.entries(v)) walk(child, s.properties?.[k], `${path}.${k}`);
    };
    walk(values, schema, "values");
  });
});

interface Schema {
  additionalProperties?: boolean | Schema;
  properties?: Record<string, Schema>;
}
