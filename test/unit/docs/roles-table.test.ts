// The table of what each role may call (docs/running-for-real.md) is the methods' declarations
// rendered (src/ctrl/auth/roles-table.ts): it must be current, cover every public service, and
// read back as exactly what was declared (the role matrix integration test reads it).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { DescService } from "@bufbuild/protobuf";
import { API_SERVICES } from "../../../src/client/services.js";
import { isAgentMethod } from "../../../src/ctrl/auth/policy.js";
import { needs, parseTable, renderTable, tableBlock } from "../../../src/ctrl/auth/roles-table.js";
import { HelloService } from "../../../src/gen/krane/hello/v1/hello_pb.js";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const GEN = join(ROOT, "src", "gen", "krane", "ctrl", "v1");

describe("roles table", () => {
  it("docs/running-for-real.md holds the table the declarations render (npm run roles-table)", () => {
    const doc = readFileSync(join(ROOT, "docs", "running-for-real.md"), "utf8");
    assert.equal(tableBlock(doc), renderTable(Object.values(API_SERVICES)));
  });

  it("covers every public service ctrl's protos define", async () => {
    const listed = new Set(Object.values(API_SERVICES).map((s) => s.typeName));
    const missing: string[] = [];
    for (const file of readdirSync(GEN).filter((f) => f.endsWith("_pb.ts"))) {
      const mod = (await import(join(GEN, file))) as Record<string, unknown>;
      for (const v of Object.values(mod)) {
        const s = v as Partial<DescService> | null;
        if (s && typeof s === "object" && s.kind === "service" && !(s.methods ?? []).every(isAgentMethod))
          if (!listed.has(s.typeName ?? "")) missing.push(s.typeName ?? "");
      }
    }
    assert.deepEqual(missing, []);
  });

  it("reads back as exactly what each method declares", () => {
    const services = Object.values(API_SERVICES);
    const declared = needs(services);
    assert.deepEqual(parseTable(renderTable(services)), declared);
    assert.equal(declared.get("WorkspaceService/DeleteWorkspace"), "owner");
    assert.equal(declared.get("WorkspaceService/CreateWorkspace"), "installation");
    assert.equal(declared.get("DeploymentService/CreateDeployment"), "developer");
    assert.equal(declared.get("LogService/StreamLogs"), "viewer");
  });

  it("refuses a service with a method that declares no policy", () => {
    assert.throws(() => needs([HelloService]), /declares no policy/);
  });
});
