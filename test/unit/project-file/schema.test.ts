// krane.yaml's JSON Schema is generated from proto/krane/ctrl/v1/project_file.proto, never kept
// by hand: the committed module must be what scripts/generate-schema.ts writes from the protos as
// they are now (`npm run generate` rewrites it), and `krane schema` prints it.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { SCHEMA_FILE, schemaModule } from "../../../scripts/generate-schema.js";
import { projectFileSchema } from "../../../src/gen/krane/ctrl/v1/project_file_schema.js";

const root = new URL("../../../", import.meta.url).pathname;

type Obj = { [key: string]: unknown };
const obj = (v: unknown): Obj => {
  assert.ok(typeof v === "object" && v !== null && !Array.isArray(v), `expected an object, got ${JSON.stringify(v)}`);
  return v as Obj;
};

describe("krane.yaml's JSON Schema", () => {
  it("is what the generator writes from the protos now (run `npm run generate` when this fails)", () => {
    assert.equal(readFileSync(`${root}${SCHEMA_FILE}`, "utf8"), schemaModule());
  });

  it("refuses unknown keys, names keys as the file does, and carries the proto comments", () => {
    const s = obj(projectFileSchema);
    assert.equal(s.additionalProperties, false);
    const defs = obj(s.$defs);
    const env = obj(defs["krane.ctrl.v1.EnvironmentFile"]);
    assert.equal(env.additionalProperties, false);
    const props = obj(env.properties);
    assert.deepEqual(Object.keys(props), [
      "regions",
      "deployment",
      "sentinel",
      "rollout",
      "autoscale",
      "endpoints",
      "domains",
      "config",
      "secrets",
      "external_secrets",
      "jobs",
    ]);
    assert.match(String(obj(props.secrets).description), /never their values/);
    // Enums take the short spelling as well as the full one.
    const strategy = obj(obj(obj(defs["krane.ctrl.v1.RolloutPolicy"]).properties).strategy);
    assert.ok((strategy.enum as string[]).includes("RECREATE"));
    assert.ok((strategy.enum as string[]).includes("ROLLOUT_STRATEGY_RECREATE"));
    // 64-bit fields are numbers in the file, not protobuf JSON's strings.
    const cpu = obj(obj(obj(defs["krane.ctrl.v1.DeploymentFile"]).properties).cpu_millicores);
    assert.equal(cpu.type, "integer");
  });

  it("is what `krane schema` prints", () => {
    const res = spawnSync(process.execPath, ["--import", "tsx", `${root}src/cli/main.ts`, "schema"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(res.status, 0, res.stderr);
    assert.deepEqual(JSON.parse(res.stdout), projectFileSchema);
  });
});
