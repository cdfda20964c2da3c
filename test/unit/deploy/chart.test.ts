// The Helm chart stays in step with what it packages: the agent's RBAC is byte for byte
// deploy/rbac/agent.yaml, and the chart's version is the npm package's.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { parse } from "yaml";

const read = (rel: string): string => readFileSync(new URL(`../../../${rel}`, import.meta.url), "utf8");

describe("the Helm chart", () => {
  it("carries deploy/rbac/agent.yaml unchanged", () => {
    assert.equal(
      read("deploy/helm/krane/files/agent-rbac.yaml"),
      read("deploy/rbac/agent.yaml"),
      "deploy/helm/krane/files/agent-rbac.yaml differs from deploy/rbac/agent.yaml: run node scripts/sync-chart-rbac.mjs",
    );
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
