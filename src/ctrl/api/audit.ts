// AuditService: pages of a chain's events, and its export as a server stream of batches followed
// by the chain's head (what `krane audit verify` checks the events against).
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { AuditRecord, ChainHead } from "../../contracts/audit.js";
import {
  AuditActorSchema,
  AuditChainHeadSchema,
  AuditChangeSchema,
  AuditEventSchema,
  AuditService,
  ExportAuditEventsResponseSchema,
  type AuditChainHead,
  type AuditEvent,
} from "../../gen/krane/ctrl/v1/audit_pb.js";
import type { Store } from "../db/store.js";
import { auditChainOf, exportAuditEvents, listAuditEvents, type AuditQuery } from "../read/audit.js";
import { validateAuditFilter } from "../validate/audit.js";
import { keys, listPage } from "./page-token.js";

export function auditEventMsg(r: AuditRecord): AuditEvent {
  return create(AuditEventSchema, {
    id: r.id,
    workspaceId: r.workspaceId,
    seq: BigInt(r.seq),
    atUnixMs: BigInt(r.at),
    actor: create(AuditActorSchema, {
      kind: r.actorKind,
      id: r.actorId,
      name: r.actorName,
      scope: r.actorScope ?? "",
      owner: r.actorOwner ?? "",
    }),
    method: r.method,
    targets: r.targets,
    requestId: r.requestId,
    clientIp: r.clientIp,
    userAgent: r.userAgent,
    idempotencyKey: r.idempotencyKey,
    code: r.code,
    message: r.message,
    changes: r.changes.map((c) =>
      create(AuditChangeSchema, {
        field: c.field,
        op: c.op,
        beforeJson: c.before === undefined ? "" : JSON.stringify(c.before),
        afterJson: c.after === undefined ? "" : JSON.stringify(c.after),
      }),
    ),
    changesJson: JSON.stringify(r.changes),
    prevHash: r.prevHash,
    hash: r.hash,
  });
}

export function chainHeadMsg(h: ChainHead): AuditChainHead {
  return create(AuditChainHeadSchema, {
    workspaceId: h.workspaceId,
    seq: BigInt(h.seq),
    hash: h.hash,
    prunedThroughSeq: BigInt(h.prunedThroughSeq),
    prunedThroughHash: h.prunedThroughHash,
  });
}

async function queryOf(store: Store, filter: Parameters<typeof validateAuditFilter>[0]): Promise<AuditQuery> {
  const f = validateAuditFilter(filter);
  return {
    workspaceId: await auditChainOf(store.db, f.workspace, f.installation),
    actor: f.actor,
    method: f.method,
    target: f.target,
    since: f.since,
    until: f.until,
    refusedOnly: f.refusedOnly,
  };
}

export function auditServiceImpl({ store }: { store: Store }): ServiceImpl<typeof AuditService> {
  return {
    async listAuditEvents(req, ctx) {
      const q = await queryOf(store, req.filter);
      const scope = `ListAuditEvents\u0000${JSON.stringify(q)}`;
      const page = await listPage(
        ctx,
        req,
        scope,
        keys.tuple("number"),
        (p) => listAuditEvents(store.db, q, { limit: p.limit, after: p.after?.[0] }),
        (e) => [e.seq] as const,
      );
      return { events: page.items.map(auditEventMsg), nextPageToken: page.nextPageToken };
    },
    async *exportAuditEvents(req) {
      const q = await queryOf(store, req.filter);
      for await (const b of exportAuditEvents(store.db, q)) {
        yield create(ExportAuditEventsResponseSchema, {
          events: b.events.map(auditEventMsg),
          head: b.head ? chainHeadMsg(b.head) : undefined,
        });
      }
    },
  };
}
