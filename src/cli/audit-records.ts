// Audit events as the API sends them → the records the chain is hashed over
// (src/contracts/audit.ts). Loaded by `krane audit export|verify` when they run.
import type { AuditChange, AuditRecord, ChainHead } from "../contracts/audit.js";
import type { AuditChainHead, AuditEvent } from "../gen/krane/ctrl/v1/audit_pb.js";

export function recordOf(e: AuditEvent): AuditRecord {
  return {
    id: e.id,
    workspaceId: e.workspaceId,
    seq: Number(e.seq),
    at: Number(e.atUnixMs),
    actorKind: (e.actor?.kind ?? "anonymous") as AuditRecord["actorKind"],
    actorId: e.actor?.id ?? "",
    actorName: e.actor?.name ?? "",
    method: e.method,
    targets: e.targets,
    requestId: e.requestId,
    clientIp: e.clientIp,
    userAgent: e.userAgent,
    idempotencyKey: e.idempotencyKey,
    code: e.code,
    message: e.message,
    // The exact list the hash covers (the structured `changes` are for reading).
    changes: JSON.parse(e.changesJson === "" ? "[]" : e.changesJson) as AuditChange[],
    prevHash: e.prevHash,
    hash: e.hash,
    // ctrl never records an empty scope: empty means the event has none.
    ...(e.actor?.scope ? { actorScope: e.actor.scope } : {}),
    ...(e.actor?.owner ? { actorOwner: e.actor.owner } : {}),
  };
}

export function headOf(h: AuditChainHead): ChainHead {
  return {
    workspaceId: h.workspaceId,
    seq: Number(h.seq),
    hash: h.hash,
    prunedThroughSeq: Number(h.prunedThroughSeq),
    prunedThroughHash: h.prunedThroughHash,
  };
}
