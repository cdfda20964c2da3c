// The shipped RBAC and fence manifests agree with src/contracts: every label, namespace, node
// class and account name the fence's CEL compares against is a contract value (a typo there
// would silently open or close the fence), the binding names the policy (a binding with an
// unknown policyName is silently ignored by the API server), and the agent's RBAC never grants
// what the fence cannot guard. The fence's behaviour itself is tested on a real API server in
// test/integration/fence.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { parseAllDocuments } from "yaml";
import { FENCE_MANIFEST } from "../../../src/cluster/index.js";
import { AGENT_RBAC_MANIFEST } from "../../../src/agent/rbac.js";
import {
  AGENT_NAMESPACE,
  AGENT_SERVICE_ACCOUNT,
  AGENT_USERNAME,
  BUILDS_NAMESPACE,
  NODE_CLASS,
  NODE_CLASS_LABEL,
  POD_SECURITY_ENFORCE_LABEL,
  RUNTIME_CLASS,
  SENTINEL_NAMESPACE,
  SENTINEL_SERVICE_ACCOUNT,
  WORKSPACE_POD_SECURITY_LEVELS,
} from "../../../src/contracts/cluster.js";
import {
  isWorkspaceNamespace,
  LABEL_MANAGED_BY,
  LABEL_WORKSPACE_ID,
  MANAGED_BY,
  OWNERSHIP_LABELS,
  workspaceNamespaceLabels,
} from "../../../src/contracts/labels.js";

type Obj = Record<string, unknown>;

function docs(file: string): Obj[] {
  return parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
}

const fence = docs(FENCE_MANIFEST);
const policy = fence.find((o) => o.kind === "ValidatingAdmissionPolicy");
const binding = fence.find((o) => o.kind === "ValidatingAdmissionPolicyBinding");
const spec = (o: Obj | undefined): Obj => (o?.spec ?? {}) as Obj;
const name = (o: Obj | undefined): unknown => (o?.metadata as Obj | undefined)?.name;

/** Every CEL expression of the policy, with the name of the part it sits in. */
function expressions(): string[] {
  const s = spec(policy);
  const out: string[] = [];
  for (const part of ["matchConditions", "variables", "validations"]) {
    for (const e of (s[part] ?? []) as Obj[]) {
      for (const k of ["expression", "messageExpression"]) if (typeof e[k] === "string") out.push(e[k]);
    }
  }
  return out;
}

test("the fence is one policy and a binding that names it, denying, failing closed", () => {
  assert.equal(fence.length, 2);
  assert.ok(policy && binding);
  assert.equal(spec(binding).policyName, name(policy));
  assert.deepEqual(spec(binding).validationActions, ["Deny"]);
  assert.equal(spec(policy).failurePolicy, "Fail");
  const rules = (spec(policy).matchConstraints as Obj).resourceRules as Obj[];
  assert.deepEqual(rules, [
    {
      apiGroups: ["*"],
      apiVersions: ["*"],
      operations: ["CREATE", "UPDATE", "DELETE", "CONNECT"],
      resources: ["*/*"],
      scope: "*",
    },
  ]);
  assert.equal(
    (spec(policy).matchConstraints as Obj).objectSelector,
    undefined,
    "objectSelector matches old or new: the CEL checks both instead",
  );
});

test("the fence applies to the agent's ServiceAccount, by its contract name", () => {
  const conds = spec(policy).matchConditions as Obj[];
  assert.equal(conds.length, 1);
  assert.equal(conds[0]?.expression, `request.userInfo.username == '${AGENT_USERNAME}'`);
  const rbac = docs(AGENT_RBAC_MANIFEST);
  const sa = rbac.find((o) => o.kind === "ServiceAccount");
  assert.deepEqual(sa?.metadata, {
    name: AGENT_SERVICE_ACCOUNT,
    namespace: AGENT_NAMESPACE,
    labels: { [LABEL_MANAGED_BY]: MANAGED_BY },
  });
});

test("every string the fence compares with is a contract value", () => {
  const allowed = new Set<string>([
    LABEL_MANAGED_BY,
    MANAGED_BY,
    LABEL_WORKSPACE_ID,
    POD_SECURITY_ENFORCE_LABEL,
    ...WORKSPACE_POD_SECURITY_LEVELS,
    ...OWNERSHIP_LABELS,
    SENTINEL_NAMESPACE,
    BUILDS_NAMESPACE,
    AGENT_NAMESPACE,
    AGENT_USERNAME,
    SENTINEL_SERVICE_ACCOUNT,
    RUNTIME_CLASS,
    NODE_CLASS_LABEL,
    NODE_CLASS.untrusted,
    NODE_CLASS.sentinel,
    // Kubernetes' own names (API groups, resources, defaults), not krane contracts.
    "",
    "default",
    "namespaces",
    "pods",
    "secrets",
    "serviceaccounts",
    "services",
    "leases",
    "coordination.k8s.io",
    "rbac.authorization.k8s.io",
    "kubernetes.io/service-account-token",
    "resize",
    "CREATE",
    "UPDATE",
    "DELETE",
  ]);
  const literals = new Set<string>();
  for (const e of expressions()) {
    // String literals outside message text ('...' + ...), i.e. in comparisons and lookups.
    if (e.trimStart().startsWith("'krane fence:")) continue;
    for (const m of e.matchAll(/'([^']*)'/g)) literals.add(m[1] ?? "");
  }
  const unknown = [...literals].filter((l) => !allowed.has(l) && !l.startsWith("krane fence:") && !l.startsWith(" "));
  assert.deepEqual(unknown, []);
  // And the contract values the rules rely on do appear.
  const text = expressions().join("\n");
  for (const v of [
    LABEL_MANAGED_BY,
    LABEL_WORKSPACE_ID,
    POD_SECURITY_ENFORCE_LABEL,
    SENTINEL_NAMESPACE,
    AGENT_NAMESPACE,
    RUNTIME_CLASS,
    NODE_CLASS_LABEL,
    NODE_CLASS.untrusted,
    NODE_CLASS.sentinel,
    SENTINEL_SERVICE_ACCOUNT,
    ...OWNERSHIP_LABELS,
    ...WORKSPACE_POD_SECURITY_LEVELS,
  ]) {
    assert.ok(text.includes(`'${v}'`), `the fence does not mention '${v}'`);
  }
});

test("the agent's RBAC never grants what the fence cannot guard", () => {
  const rbac = docs(AGENT_RBAC_MANIFEST);
  for (const role of rbac.filter((o) => o.kind === "ClusterRole" || o.kind === "Role")) {
    for (const rule of (role.rules ?? []) as Obj[]) {
      const groups = rule.apiGroups as string[];
      const resources = rule.resources as string[];
      const verbs = rule.verbs as string[];
      const where = `${String(name(role))}: ${JSON.stringify(rule)}`;
      assert.ok(!groups.includes("*") && !resources.includes("*") && !verbs.includes("*"), `wildcard in ${where}`);
      assert.ok(
        !groups.includes("admissionregistration.k8s.io"),
        `admission objects are not guarded by admission: ${where}`,
      );
      assert.ok(!groups.includes("rbac.authorization.k8s.io"), where);
      for (const v of ["escalate", "bind", "impersonate"]) assert.ok(!verbs.includes(v), `${v} in ${where}`);
      // No subresource but reading pods' logs (`krane logs`): a read, which admission never sees,
      // so the agent keeps to workspace namespaces itself (agent.yaml's notes); and patching
      // pods/resize (the startup CPU boost), which the fence narrows to CPU limits of krane's
      // pods in workspace namespaces; never exec, attach, port-forward or any other write.
      const logsOnly = (r: string): boolean => r === "pods/log" && verbs.every((v) => v === "get");
      const resizeOnly = (r: string): boolean => r === "pods/resize" && verbs.every((v) => v === "patch");
      assert.ok(!resources.some((r) => r.includes("/") && !logsOnly(r) && !resizeOnly(r)), `subresource in ${where}`);
      // Secrets are write-only for the agent (it creates, patches and deletes its own;
      // the fence guards every write), never readable: listing every Secret of the cluster is
      // not a right a leaked agent token may carry. ServiceAccounts are written only without
      // tokens (the fence's rule).
      if (resources.includes("secrets"))
        assert.ok(!verbs.some((v) => ["get", "list", "watch"].includes(v)), `secrets readable in ${where}`);
      if (resources.includes("namespaces"))
        assert.ok(!verbs.some((v) => ["update", "patch", "delete", "list"].includes(v)), where);
    }
  }
});

test("the namespace labels the agent renders make a workspace namespace, and none can be left out", () => {
  fc.assert(
    fc.property(
      fc.stringMatching(/^[a-z0-9_]{1,20}$/),
      fc.constantFrom(...Object.keys(workspaceNamespaceLabels("x"))),
      (id, drop) => {
        const labels = workspaceNamespaceLabels(id);
        assert.equal(isWorkspaceNamespace(labels), true);
        const without = { ...labels };
        delete without[drop];
        assert.equal(isWorkspaceNamespace(without), false);
        assert.equal(isWorkspaceNamespace({ ...labels, [POD_SECURITY_ENFORCE_LABEL]: "privileged" }), false);
      },
    ),
  );
  assert.equal(isWorkspaceNamespace(undefined), false);
});
