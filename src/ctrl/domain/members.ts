// Workspace members and service accounts (tables members, service_accounts).
//
// A member is a person of a workspace, keyed by email address: an invitation (granted_role set,
// subject null) until their first sign-in whose provider vouches for the address
// (email_verified), which records the provider's subject ("<issuer>#<sub>") and from then on
// finds them by it. A member's role is the higher of the one the workspace granted and the one
// the provider's groups gave at the last sign-in or refresh (the installation maps groups to
// roles); with neither, they are no member and their row goes. Addresses the provider does not
// vouch for never accept an invitation: a provider that lets users set their own address would
// otherwise let anyone take one.
//
// A service account is a named owner of a workspace's CI tokens, with a role of its own.
//
// These are the tables' own operations; what removes someone together with their sessions and
// tokens is ./access.ts.
import type { Kysely } from "kysely";
import { higherRole, isRoleName, roleRank, withArticle, type RoleName } from "../../contracts/roles.js";
import type { WriteTx } from "../db/outbox.js";
import type { Database, MemberRow, ServiceAccountRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { alreadyExists, DomainError, invalidArgument } from "../errors.js";
import { randomChars } from "./ids.js";
import { findWorkspace } from "./tenancy.js";

type Reader = Kysely<Database>;

export function newMemberId(): string {
  return `mem_${randomChars(20)}`;
}

export function newServiceAccountId(): string {
  return `sa_${randomChars(20)}`;
}

/** A role given by name in a request (`field`): one of the four, or invalid_argument naming the field. */
export function parseRole(field: string, v: string): RoleName {
  const r = v.trim().toLowerCase();
  if (!isRoleName(r))
    throw invalidArgument(field, `"${v.slice(0, 32)}" is not a role: viewer, developer, admin or owner`);
  return r;
}

/** An email address as members are keyed: trimmed, lower case. */
export function normalEmail(field: string, v: string): string {
  const e = v.trim().toLowerCase();
  if (e.length > 254 || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(e))
    throw invalidArgument(field, `"${v.slice(0, 64)}" is not an email address`);
  return e;
}

/** Who grants a role: an installation token (anything) or a member or service account with a role. */
export type Granter = "installation" | RoleName;

/**
 * Refuses a grant above the granter's own role, and any change of an owner by a non-owner
 * (permission_denied): an admin cannot make an owner, nor demote or remove one.
 */
export function checkGrant(granter: Granter, granted: RoleName | null, current: RoleName | null = null): void {
  if (granter === "installation") return;
  for (const r of [granted, current]) {
    if (r === null) continue;
    if (roleRank(r) > roleRank(granter))
      throw new DomainError(
        "permission_denied",
        `${withArticle(granter)} cannot ${r === current ? "change or remove" : "grant"} the ${r} role`,
      );
    if (r === "owner" && granter !== "owner")
      throw new DomainError("permission_denied", "only an owner makes, changes or removes an owner");
  }
}

export interface MemberRecord {
  id: string;
  workspaceId: string;
  email: string;
  name: string;
  grantedRole: RoleName | null;
  groupRole: RoleName | null;
  /** The role they act with: the higher of the two (null: none, only while being removed). */
  role: RoleName | null;
  subject: string | null;
  createdAt: number;
  joinedAt: number | null;
}

function roleOrNull(v: string | null): RoleName | null {
  return v !== null && isRoleName(v) ? v : null;
}

export function memberRecord(r: MemberRow): MemberRecord {
  const granted = roleOrNull(r.granted_role);
  const group = roleOrNull(r.group_role);
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    email: r.email,
    name: r.name,
    grantedRole: granted,
    groupRole: group,
    role: higherRole(granted, group),
    subject: r.subject,
    createdAt: Number(r.created_at),
    joinedAt: r.joined_at === null ? null : Number(r.joined_at),
  };
}

/** A member of a workspace by id (mem_…) or email address. */
export async function findMember(db: Reader, workspaceId: string, ref: string): Promise<MemberRow | undefined> {
  const q = db.selectFrom("members").selectAll().where("workspace_id", "=", workspaceId);
  return ref.startsWith("mem_")
    ? q.where("id", "=", ref).executeTakeFirst()
    : q.where("email", "=", ref.trim().toLowerCase()).executeTakeFirst();
}

export async function inviteMember(
  store: Store,
  workspaceRef: string,
  email: string,
  role: RoleName,
  granter: Granter,
): Promise<MemberRecord> {
  checkGrant(granter, role);
  return store.write(async (tx) => {
    const ws = await findWorkspace(tx.trx, workspaceRef);
    if (await findMember(tx.trx, ws.id, email)) throw alreadyExists(`member "${email}" of workspace "${ws.slug}"`);
    const row: MemberRow = {
      id: newMemberId(),
      workspace_id: ws.id,
      email,
      name: "",
      granted_role: role,
      group_role: null,
      subject: null,
      created_at: tx.now,
      joined_at: null,
    };
    await tx.trx.insertInto("members").values(row).execute();
    await noteWriteSubject(tx, row.id);
    return memberRecord(row);
  });
}

/** Deletes a member's row (./access.ts ends their sessions and tokens in the same transaction). */
export async function deleteMemberRow(tx: WriteTx, memberId: string): Promise<void> {
  await tx.trx.deleteFrom("members").where("id", "=", memberId).execute();
}

export async function setGrantedRole(tx: WriteTx, memberId: string, role: RoleName | null): Promise<void> {
  await tx.trx.updateTable("members").set({ granted_role: role }).where("id", "=", memberId).execute();
}

/** Every member and service account of a workspace goes with it (its deletion's last step). */
export async function deleteWorkspaceMembers(tx: WriteTx, workspaceId: string): Promise<void> {
  await tx.trx.deleteFrom("members").where("workspace_id", "=", workspaceId).execute();
  await tx.trx.deleteFrom("service_accounts").where("workspace_id", "=", workspaceId).execute();
}

// ---------------------------------------------------------------- service accounts

export interface ServiceAccountRecord {
  id: string;
  workspaceId: string;
  name: string;
  role: RoleName;
  createdAt: number;
}

export function serviceAccountRecord(r: ServiceAccountRow): ServiceAccountRecord {
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    name: r.name,
    role: roleOrNull(r.role) ?? "viewer",
    createdAt: Number(r.created_at),
  };
}

export async function findServiceAccount(
  db: Reader,
  workspaceId: string,
  ref: string,
): Promise<ServiceAccountRow | undefined> {
  return db
    .selectFrom("service_accounts")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where(ref.startsWith("sa_") ? "id" : "name", "=", ref)
    .executeTakeFirst();
}

/** Adds a service account inside the caller's transaction (a token's own, ./tokens.ts). */
export async function insertServiceAccount(
  tx: WriteTx,
  workspaceId: string,
  name: string,
  role: RoleName,
): Promise<ServiceAccountRow> {
  const row: ServiceAccountRow = {
    id: newServiceAccountId(),
    workspace_id: workspaceId,
    name,
    role,
    created_at: tx.now,
  };
  await tx.trx.insertInto("service_accounts").values(row).execute();
  return row;
}

export async function createServiceAccount(
  store: Store,
  workspaceRef: string,
  name: string,
  role: RoleName,
  granter: Granter,
): Promise<ServiceAccountRecord> {
  checkGrant(granter, role);
  return store.write(async (tx) => {
    const ws = await findWorkspace(tx.trx, workspaceRef);
    if (await findServiceAccount(tx.trx, ws.id, name))
      throw alreadyExists(`service account "${name}" of workspace "${ws.slug}"`);
    const row = await insertServiceAccount(tx, ws.id, name, role);
    await noteWriteSubject(tx, row.id);
    return serviceAccountRecord(row);
  });
}

export async function deleteServiceAccountRow(tx: WriteTx, id: string): Promise<void> {
  await tx.trx.deleteFrom("service_accounts").where("id", "=", id).execute();
}

// ---------------------------------------------------------------- sign-in

/** What the provider vouched for at a sign-in (../auth/oidc.ts). */
export interface SignInIdentity {
  /** "<issuer>#<sub>". */
  subject: string;
  /** Lower case; "" when the provider gave none. */
  email: string;
  emailVerified: boolean;
  name: string;
}

/**
 * The members a signed-in person is, in every workspace: those their subject names, and the
 * invitations their verified address accepts (never an invitation another subject accepted).
 */
export async function membersOfIdentity(db: Reader, who: SignInIdentity): Promise<MemberRow[]> {
  const bySubject = await db.selectFrom("members").selectAll().where("subject", "=", who.subject).execute();
  if (!who.emailVerified || who.email === "") return bySubject;
  const invited = await db
    .selectFrom("members")
    .selectAll()
    .where("email", "=", who.email)
    .where("subject", "is", null)
    .execute();
  const seen = new Set(bySubject.map((m) => m.workspace_id));
  return [...bySubject, ...invited.filter((m) => !seen.has(m.workspace_id))];
}

/**
 * Records a sign-in on a member's row: the first accepts the invitation (subject, joined_at),
 * every one sets the name the provider gave and the role its groups give (null: none).
 */
export async function recordSignIn(
  tx: WriteTx,
  row: MemberRow,
  who: SignInIdentity,
  groupRole: RoleName | null,
): Promise<MemberRecord> {
  const next: MemberRow = {
    ...row,
    subject: who.subject,
    name: who.name.slice(0, 200),
    group_role: groupRole,
    joined_at: row.joined_at ?? tx.now,
  };
  await tx.trx
    .updateTable("members")
    .set({ subject: next.subject, name: next.name, group_role: next.group_role, joined_at: next.joined_at })
    .where("id", "=", row.id)
    .execute();
  return memberRecord(next);
}

/** A member made by a sign-in whose groups give a role in a workspace that never invited them. */
export async function insertGroupMember(
  tx: WriteTx,
  workspaceId: string,
  who: SignInIdentity,
  groupRole: RoleName,
): Promise<MemberRecord> {
  const row: MemberRow = {
    id: newMemberId(),
    workspace_id: workspaceId,
    email: who.email,
    name: who.name.slice(0, 200),
    granted_role: null,
    group_role: groupRole,
    subject: who.subject,
    created_at: tx.now,
    joined_at: tx.now,
  };
  await tx.trx.insertInto("members").values(row).execute();
  return memberRecord(row);
}
