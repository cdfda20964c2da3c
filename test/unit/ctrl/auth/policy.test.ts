// Every method of every service ctrl serves declares its policy in its proto (scope, role, audit
// subject; reads say so with idempotency_level): a method without one fails here. What the
// declarations say is read the same way by authorization, the audit log and the CLI.
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { declarationProblem, isAgentMethod, isRead, policyOf } from "../../../../src/ctrl/auth/policy.js";
import { HelloService } from "../../../../src/gen/krane/hello/v1/hello_pb.js";

const GEN = join(import.meta.dirname, "../../../../src/gen/krane/ctrl/v1");

async function ctrlServices(): Promise<DescService[]> {
  const out: DescService[] = [];
  for (const file of readdirSync(GEN).filter((f) => f.endsWith("_pb.ts"))) {
    const mod = (await import(join(GEN, file))) as Record<string, unknown>;
    for (const v of Object.values(mod)) {
      const s = v as Partial<DescService> | null;
      if (s && typeof s === "object" && s.kind === "service") out.push(s as DescService);
    }
  }
  return out;
}

async function method(name: string): Promise<DescMethod> {
  for (const s of await ctrlServices()) {
    const m = s.methods.find((x) => x.name === name);
    if (m) return m;
  }
  throw new Error(`no method ${name}`);
}

describe("method policies", () => {
  it("every method of every ctrl service declares a complete policy", async () => {
    const services = await ctrlServices();
    assert.ok(services.length >= 17, `found ${services.length} services`);
    const problems = services.flatMap((s) => s.methods.map(declarationProblem)).filter((p) => p !== undefined);
    assert.deepEqual(problems, []);
  });

  it("a method without a declaration is named, and has no policy", () => {
    assert.equal(policyOf(HelloService.method.say), undefined);
    assert.match(
      declarationProblem(HelloService.method.say) ?? "",
      /HelloService\/Say: no \(krane\.ctrl\.v1\.policy\)/,
    );
  });

  it("agents' methods are exactly those of ClusterService and LogChannelService", async () => {
    const agents = new Set(
      (await ctrlServices()).flatMap((s) => s.methods.filter(isAgentMethod).map((m) => m.parent.name)),
    );
    assert.deepEqual([...agents].sort(), ["ClusterService", "LogChannelService"]);
    for (const s of await ctrlServices())
      assert.ok(s.methods.every(isAgentMethod) || !s.methods.some(isAgentMethod), `${s.name} mixes agents and users`);
  });

  it("tells reads from changes", async () => {
    for (const m of [
      "GetWorkspace",
      "ListAuditEvents",
      "ExportAuditEvents",
      "WatchDeployments",
      "History",
      "GetRolloutStatus",
    ])
      assert.equal(isRead(await method(m)), true, m);
    for (const m of ["CreateDeployment", "VerifyDomain", "Scale", "SetSecrets", "ApprovePreview", "DeletePreviewHook"])
      assert.equal(isRead(await method(m)), false, m);
  });
});
