// MemberService: a workspace's members and service accounts; SessionService: members' sign-in
// sessions. The Authenticator has checked the caller's scope and role (admin for changes, viewer
// for one's own sessions) before these run; what is left here is the rule no declaration holds:
// nobody grants a role above their own, only an owner touches an owner (../domain/members.ts
// checkGrant), and another member's sessions are an admin's business.
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  MemberSchema,
  MemberService,
  ServiceAccountSchema,
  SessionSchema,
  SessionService,
  type Member,
  type ServiceAccount,
  type Session,
} from "../../gen/krane/ctrl/v1/access_pb.js";
import { allows } from "../../contracts/roles.js";
import { callerUser } from "../auth/principal.js";
import { deleteServiceAccount, removeMember, setMemberRole, type Ended } from "../domain/access.js";
import {
  deleteMemberSession,
  findMemberSession,
  listMemberSessions,
  type MemberSessionRecord,
} from "../domain/member-sessions.js";
import {
  checkGrant,
  createServiceAccount,
  findMember,
  inviteMember,
  memberRecord,
  normalEmail,
  parseRole,
  serviceAccountRecord,
  type Granter,
  type MemberRecord,
  type ServiceAccountRecord,
} from "../domain/members.js";
import { findWorkspace } from "../domain/tenancy.js";
import { listMembers, listServiceAccounts, tokenIdsOfMember } from "../read/access.js";
import { serviceAccountRef, workspaceRef } from "../validate/api.js";
import { slug } from "../validate/rules.js";
import { DomainError } from "../errors.js";
import type { ApiDeps } from "./handlers.js";
import { keys, listPage } from "./page-token.js";

/** Whom the caller grants as: an installation token anything, anyone else up to their own role. */
function granterOf(ctx: Pick<HandlerContext, "values">): Granter {
  const u = callerUser(ctx);
  return u.workspace === null ? "installation" : (u.role ?? "viewer");
}

function memberMsg(m: MemberRecord): Member {
  return create(MemberSchema, {
    id: m.id,
    workspaceId: m.workspaceId,
    email: m.email,
    name: m.name,
    role: m.role ?? "",
    state: m.subject === null ? "invited" : "active",
    subject: m.subject ?? "",
    createdAtUnixMs: BigInt(m.createdAt),
    joinedAtUnixMs: BigInt(m.joinedAt ?? 0),
  });
}

function serviceAccountMsg(s: ServiceAccountRecord): ServiceAccount {
  return create(ServiceAccountSchema, {
    id: s.id,
    workspaceId: s.workspaceId,
    name: s.name,
    role: s.role,
    createdAtUnixMs: BigInt(s.createdAt),
  });
}

/** A member by id (mem_…) or email address. */
function memberRef(field: string, v: string): string {
  return v.startsWith("mem_") ? v : normalEmail(field, v);
}

export function memberServiceImpl({ store, auth }: ApiDeps): ServiceImpl<typeof MemberService> {
  const forget = (ended: Ended): void => {
    for (const id of ended.tokenIds) auth?.forgetUserToken(id);
  };
  return {
    async inviteMember(req, ctx) {
      const ws = workspaceRef("workspace", req.workspace);
      const email = normalEmail("email", req.email);
      const role = parseRole("role", req.role);
      return { member: memberMsg(await inviteMember(store, ws, email, role, granterOf(ctx))) };
    },
    async listMembers(req, ctx) {
      const ws = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const page = await listPage(
        ctx,
        req,
        `ListMembers\u0000${ws.id}`,
        keys.string,
        (q) => listMembers(store.db, ws.id, q),
        (m) => m.email,
      );
      return { members: page.items.map((m) => memberMsg(memberRecord(m))), nextPageToken: page.nextPageToken };
    },
    async setMemberRole(req, ctx) {
      const ws = workspaceRef("workspace", req.workspace);
      const ref = memberRef("member", req.member);
      const role = parseRole("role", req.role);
      const { member, ended } = await setMemberRole(store, ws, ref, role, granterOf(ctx));
      forget(ended);
      // Their tokens' cached lookups hold the old role: drop them on this replica at once.
      forget({ tokenIds: await tokenIdsOfMember(store.db, member.id) });
      return { member: memberMsg(member) };
    },
    async removeMember(req, ctx) {
      const ws = workspaceRef("workspace", req.workspace);
      const { member, ended } = await removeMember(store, ws, memberRef("member", req.member), granterOf(ctx));
      forget(ended);
      return { member: memberMsg(member) };
    },
    async createServiceAccount(req, ctx) {
      const ws = workspaceRef("workspace", req.workspace);
      const name = slug("name", req.name);
      const role = parseRole("role", req.role);
      return {
        serviceAccount: serviceAccountMsg(await createServiceAccount(store, ws, name, role, granterOf(ctx))),
      };
    },
    async listServiceAccounts(req, ctx) {
      const ws = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const page = await listPage(
        ctx,
        req,
        `ListServiceAccounts\u0000${ws.id}`,
        keys.string,
        (q) => listServiceAccounts(store.db, ws.id, q),
        (s) => s.name,
      );
      return {
        serviceAccounts: page.items.map((s) => serviceAccountMsg(serviceAccountRecord(s))),
        nextPageToken: page.nextPageToken,
      };
    },
    async deleteServiceAccount(req, ctx) {
      const ws = workspaceRef("workspace", req.workspace);
      const { serviceAccount, ended } = await deleteServiceAccount(
        store,
        ws,
        serviceAccountRef("name", req.name),
        granterOf(ctx),
      );
      forget(ended);
      return { serviceAccount: serviceAccountMsg(serviceAccount) };
    },
  };
}

function sessionMsg(s: MemberSessionRecord, currentId: string): Session {
  return create(SessionSchema, {
    id: s.id,
    memberId: s.memberId,
    email: s.email,
    client: s.client,
    ip: s.ip,
    createdAtUnixMs: BigInt(s.createdAt),
    lastUsedAtUnixMs: BigInt(s.refreshedAt),
    expiresAtUnixMs: BigInt(s.expiresAt),
    current: s.id === currentId,
  });
}

/** Refuses another member's sessions below admin, and an owner's below owner. */
function checkOthersSessions(granter: Granter, role: Parameters<typeof checkGrant>[2]): void {
  if (granter !== "installation" && !allows(granter, "admin"))
    throw new DomainError("permission_denied", "only an admin sees or ends another member's sessions");
  checkGrant(granter, null, role);
}

export function sessionServiceImpl({ store, auth }: ApiDeps): ServiceImpl<typeof SessionService> {
  return {
    async listSessions(req, ctx) {
      const ws = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const me = callerUser(ctx);
      if (req.allMembers) checkOthersSessions(granterOf(ctx), null);
      else if (!me.member) return { sessions: [] };
      const sessions = await listMemberSessions(
        store.db,
        ws.id,
        Date.now(),
        req.allMembers ? undefined : me.member?.id,
      );
      return { sessions: sessions.map((s) => sessionMsg(s, me.tokenId)) };
    },
    async revokeSession(req, ctx) {
      const ws = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const id = req.id.trim();
      if (!id.startsWith("mss_") || id.length > 64)
        throw new DomainError("invalid_argument", "id: a session id (mss_…, krane session list)", "id");
      const me = callerUser(ctx);
      const found = await findMemberSession(store.db, ws.id, id);
      if (!found) throw new DomainError("not_found", `session "${id}" not found (it may have ended)`);
      if (found.memberId !== me.member?.id) {
        const owner = await findMember(store.db, ws.id, found.memberId);
        checkOthersSessions(granterOf(ctx), owner ? memberRecord(owner).role : null);
      }
      const [record] = (await listMemberSessions(store.db, ws.id, 0, found.memberId)).filter((s) => s.id === id);
      const deleted = await store.write((tx) => deleteMemberSession(tx, id));
      if (!deleted || !record) throw new DomainError("not_found", `session "${id}" not found (it may have ended)`);
      auth?.forgetUserToken(id);
      return { session: sessionMsg(record, me.tokenId) };
    },
  };
}
