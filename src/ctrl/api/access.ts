// MemberService: a workspace's members and service accounts. The Authenticator has checked the
// caller's scope and role (admin for changes) before these run; what is left here is the rule no
// declaration holds: nobody grants a role above their own, and only an owner touches an owner
// (../domain/members.ts checkGrant).
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  MemberSchema,
  MemberService,
  ServiceAccountSchema,
  type Member,
  type ServiceAccount,
} from "../../gen/krane/ctrl/v1/access_pb.js";
import { callerUser } from "../auth/principal.js";
import { deleteServiceAccount, removeMember, setMemberRole, type Ended } from "../domain/access.js";
import {
  createServiceAccount,
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
