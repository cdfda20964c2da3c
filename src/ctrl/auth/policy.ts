// Each method's policy, as its proto declares it (proto/krane/ctrl/v1/policy.proto): who may call
// it, the role it needs, what its audit event is about, and (protobuf's own idempotency_level)
// whether it changes state. Read from the generated descriptors, once per method; every layer
// that needs a method's policy asks here, never a table keyed by method names.
import { getOption, hasOption, type DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { AuditSubject, policy, Role, Scope, type MethodPolicy } from "../../gen/krane/ctrl/v1/policy_pb.js";

export { AuditSubject, Role, Scope, type MethodPolicy };

const declared = new WeakMap<DescMethod, MethodPolicy | null>();

/** The method's declared policy (undefined: it declares none, and is refused to workspace tokens). */
export function policyOf(method: DescMethod): MethodPolicy | undefined {
  let p = declared.get(method);
  if (p === undefined) {
    p = hasOption(method, policy) ? getOption(method, policy) : null;
    declared.set(method, p);
  }
  return p ?? undefined;
}

/** Agents' methods (ClusterService, LogChannelService): cluster tokens only. */
export function isAgentMethod(method: DescMethod): boolean {
  return policyOf(method)?.scope === Scope.AGENT;
}

/** A method that changes nothing (a read): only its refusals are audited. */
export function isRead(method: DescMethod): boolean {
  return method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS;
}

/**
 * What is wrong with a method's declaration, or undefined when it is complete (the test over every
 * generated service asks this of each method, so a method without one fails `npm test`).
 */
export function declarationProblem(method: DescMethod): string | undefined {
  const p = policyOf(method);
  const name = `${method.parent.typeName}/${method.name}`;
  if (!p) return `${name}: no (krane.ctrl.v1.policy) option`;
  if (p.scope === Scope.UNSPECIFIED) return `${name}: policy.scope is not set`;
  if (p.audit === AuditSubject.UNSPECIFIED) return `${name}: policy.audit is not set (reads: AUDIT_SUBJECT_NONE)`;
  const userMethod = p.scope !== Scope.AGENT && p.scope !== Scope.INSTALLATION;
  if (userMethod && p.role === Role.UNSPECIFIED) return `${name}: policy.role is not set`;
  if (!userMethod && p.role !== Role.UNSPECIFIED)
    return `${name}: policy.role is for workspace methods (this one is ${Scope[p.scope]})`;
  if (isRead(method) !== (p.audit === AuditSubject.NONE) && p.scope !== Scope.AGENT)
    return `${name}: a read (idempotency_level NO_SIDE_EFFECTS) has audit AUDIT_SUBJECT_NONE, and only a read`;
  return undefined;
}
