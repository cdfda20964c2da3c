// The tenancy decision (src/ctrl/auth/scope.ts), pure: an installation token passes every rule; a
// workspace token reaches its own workspace only (by id, or by its slug while the slug still
// names it); another workspace's object and one that does not exist are refused alike, whatever
// a lookup found; a reference that is not the token's own is refused without any lookup; the
// installation's calls and unruled methods are permission_denied; requests are read by the rule.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { create } from "@bufbuild/protobuf";
import { AuditService, ListAuditEventsRequestSchema } from "../../../../src/gen/krane/ctrl/v1/audit_pb.js";
import { HelloService } from "../../../../src/gen/krane/hello/v1/hello_pb.js";
import {
  DeploymentService,
  GetDeploymentRequestSchema,
  ListWorkspacesRequestSchema,
  WorkspaceService,
} from "../../../../src/gen/krane/ctrl/v1/api_pb.js";
import { claimOf, decide, lookupFor, ruleOf, type Claim } from "../../../../src/ctrl/auth/scope.js";

const id = fc.stringMatching(/^ws_[a-z0-9]{4,20}$/);
const slug = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/);
const scopeArb = fc.record({ id, slug });
const refArb = fc.oneof(id, slug, fc.string({ maxLength: 80 }));
const claimArb: fc.Arbitrary<Claim> = fc.oneof(
  fc.constant<Claim>({ kind: "installation" }),
  fc.constant<Claim>({ kind: "caller" }),
  fc.constant<Claim>({ kind: "unruled" }),
  fc.constantFrom("workspace", "filter.workspace", "deployment_id").map((field): Claim => ({ kind: "missing", field })),
  refArb.map((ref): Claim => ({ kind: "workspace", ref })),
  fc.stringMatching(/^dep_[a-z0-9]{1,20}$/).map((i): Claim => ({ kind: "deployment", id: i })),
);
const resolvedArb = fc.option(id, { nil: undefined });

test("an installation token passes every rule", () => {
  fc.assert(
    fc.property(claimArb, resolvedArb, (claim, resolved) =>
      assert.deepEqual(decide(null, claim, resolved), { allow: true }),
    ),
  );
});

test("a workspace token reaches its own workspace by id, or by slug while the slug still names it", () => {
  fc.assert(
    fc.property(scopeArb, resolvedArb, (own, resolved) => {
      assert.ok(decide(own, { kind: "workspace", ref: own.id }, resolved).allow);
      assert.equal(decide(own, { kind: "workspace", ref: own.slug }, resolved).allow, resolved === own.id);
      assert.ok(decide(own, { kind: "caller" }, resolved).allow);
      assert.equal(decide(own, { kind: "deployment", id: "dep_x" }, resolved).allow, resolved === own.id);
    }),
  );
});

test("another workspace's object reads exactly as one that does not exist", () => {
  fc.assert(
    fc.property(scopeArb, refArb, id, (own, ref, other) => {
      fc.pre(ref !== own.id && ref !== own.slug && other !== own.id);
      const claim: Claim = { kind: "workspace", ref };
      // No lookup is made for it (its timing says nothing), and whatever one would have found…
      assert.deepEqual(lookupFor(own, claim), { kind: "none" });
      const refusals = [undefined, other, own.id].map((r) => decide(own, claim, r));
      // …the refusal is the same not_found, naming only what the caller sent.
      for (const r of refusals) assert.deepEqual(r, refusals[0]);
      assert.deepEqual(refusals[0], {
        allow: false,
        code: "not_found",
        message: `workspace "${ref.slice(0, 64)}" not found`,
      });
      const dep: Claim = { kind: "deployment", id: "dep_abc" };
      assert.deepEqual(decide(own, dep, other), decide(own, dep, undefined));
      assert.deepEqual(decide(own, dep, undefined), {
        allow: false,
        code: "not_found",
        message: 'deployment "dep_abc" not found',
      });
    }),
  );
});

test("a slug is read again before it counts as the token's own; an id or a deployment is looked up as needed", () => {
  fc.assert(
    fc.property(scopeArb, (own) => {
      assert.deepEqual(lookupFor(own, { kind: "workspace", ref: own.slug }), {
        kind: "workspace-by-slug",
        slug: own.slug,
      });
      assert.deepEqual(lookupFor(own, { kind: "workspace", ref: own.id }), { kind: "none" });
      assert.deepEqual(lookupFor(own, { kind: "deployment", id: "dep_1" }), { kind: "deployment", id: "dep_1" });
      for (const c of [{ kind: "installation" }, { kind: "caller" }, { kind: "unruled" }] as Claim[])
        assert.deepEqual(lookupFor(own, c), { kind: "none" });
    }),
  );
});

test("the installation's calls and methods without a rule are permission_denied; an empty reference names its field", () => {
  fc.assert(
    fc.property(scopeArb, resolvedArb, (own, resolved) => {
      for (const kind of ["installation", "unruled"] as const) {
        const v = decide(own, { kind }, resolved);
        assert.ok(!v.allow && v.code === "permission_denied");
      }
      const v = decide(own, { kind: "missing", field: "filter.workspace" }, resolved);
      assert.deepEqual(v, { allow: false, code: "invalid_argument", message: "filter.workspace: is required" });
    }),
  );
});

test("claims are read from the request by the method's rule", () => {
  const audit = ruleOf(AuditService.method.listAuditEvents);
  assert.deepEqual(claimOf(audit, create(ListAuditEventsRequestSchema, { filter: { workspace: "acme" } })), {
    kind: "workspace",
    ref: "acme",
  });
  assert.deepEqual(
    claimOf(audit, create(ListAuditEventsRequestSchema, { filter: { installation: true, workspace: "acme" } })),
    { kind: "installation" },
  );
  assert.deepEqual(claimOf(audit, create(ListAuditEventsRequestSchema, {})), {
    kind: "missing",
    field: "filter.workspace",
  });
  const get = ruleOf(DeploymentService.method.getDeployment);
  assert.deepEqual(claimOf(get, create(GetDeploymentRequestSchema, { deploymentId: "dep_1" })), {
    kind: "deployment",
    id: "dep_1",
  });
  assert.deepEqual(claimOf(ruleOf(WorkspaceService.method.listWorkspaces), create(ListWorkspacesRequestSchema, {})), {
    kind: "caller",
  });
  assert.deepEqual(claimOf(ruleOf(WorkspaceService.method.createWorkspace), {}), { kind: "installation" });
  assert.deepEqual(claimOf(ruleOf(HelloService.method.say), {}), { kind: "unruled" });
});
