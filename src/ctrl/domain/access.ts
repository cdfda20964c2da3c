// Who may act in a workspace, as whole changes: removing a member or service account together
// with what acted as them (their tokens, ./tokens.ts, and sign-in sessions, ./member-sessions.ts) in one transaction, and changing a
// member's role, each answering what it ended so the Authenticator forgets it at once. The
// tables' own operations are ./members.ts.
import type { RoleName } from "../../contracts/roles.js";
import type { WriteTx } from "../db/outbox.js";
import type { MemberRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { notFound } from "../errors.js";
import {
  checkGrant,
  deleteMemberRow,
  deleteServiceAccountRow,
  deleteWorkspaceMembers,
  findMember,
  findServiceAccount,
  memberRecord,
  serviceAccountRecord,
  setGrantedRole,
  type Granter,
  type MemberRecord,
  type ServiceAccountRecord,
} from "./members.js";
import { deleteMemberSessions } from "./member-sessions.js";
import { findWorkspace } from "./tenancy.js";
import { revokeOwnedTokens } from "./tokens.js";

/** What a change ended, for the Authenticator to forget at once. */
export interface Ended {
  /** API tokens' ids and sign-in sessions' (mss_…). */
  tokenIds: string[];
}

export const NOTHING_ENDED: Ended = { tokenIds: [] };

/** A member's row, tokens and sign-in sessions, in the caller's transaction. */
export async function dropMember(tx: WriteTx, memberId: string): Promise<Ended> {
  const tokenIds = await revokeOwnedTokens(tx, { memberId });
  const sessionIds = await deleteMemberSessions(tx, { memberId });
  await deleteMemberRow(tx, memberId);
  return { tokenIds: [...tokenIds, ...sessionIds] };
}

/** A workspace's member by email or id, in the caller's transaction; not_found names both. */
async function memberOf(tx: WriteTx, workspaceRef: string, memberRef: string): Promise<MemberRow> {
  const ws = await findWorkspace(tx.trx, workspaceRef);
  const row = await findMember(tx.trx, ws.id, memberRef);
  if (!row) throw notFound(`member "${memberRef.slice(0, 254)}" of workspace "${ws.slug}"`);
  return row;
}

/**
 * Sets the role the workspace grants a member (null: none). A member left with no role at all
 * (none granted, none from groups) is removed.
 */
export async function setMemberRole(
  store: Store,
  workspaceRef: string,
  memberRef: string,
  role: RoleName | null,
  granter: Granter,
): Promise<{ member: MemberRecord; ended: Ended }> {
  return store.write(async (tx) => {
    const row = await memberOf(tx, workspaceRef, memberRef);
    const before = memberRecord(row);
    checkGrant(granter, role, before.grantedRole);
    const after = memberRecord({ ...row, granted_role: role });
    if (after.role === null) return { member: after, ended: await dropMember(tx, row.id) };
    await setGrantedRole(tx, row.id, role);
    return { member: after, ended: NOTHING_ENDED };
  });
}

export async function removeMember(
  store: Store,
  workspaceRef: string,
  memberRef: string,
  granter: Granter,
): Promise<{ member: MemberRecord; ended: Ended }> {
  return store.write(async (tx) => {
    const row = await memberOf(tx, workspaceRef, memberRef);
    const member = memberRecord(row);
    checkGrant(granter, null, member.role);
    return { member, ended: await dropMember(tx, row.id) };
  });
}

export async function deleteServiceAccount(
  store: Store,
  workspaceRef: string,
  ref: string,
  granter: Granter,
): Promise<{ serviceAccount: ServiceAccountRecord; ended: Ended }> {
  return store.write(async (tx) => {
    const ws = await findWorkspace(tx.trx, workspaceRef);
    const row = await findServiceAccount(tx.trx, ws.id, ref);
    if (!row) throw notFound(`service account "${ref.slice(0, 64)}" of workspace "${ws.slug}"`);
    const serviceAccount = serviceAccountRecord(row);
    checkGrant(granter, null, serviceAccount.role);
    const tokenIds = await revokeOwnedTokens(tx, { serviceAccountId: row.id });
    await deleteServiceAccountRow(tx, row.id);
    return { serviceAccount, ended: { tokenIds } };
  });
}

/** A workspace's people go with it (its deletion's last step; its tokens go by ./tokens.ts). */
export async function removeWorkspaceAccess(tx: WriteTx, workspaceId: string): Promise<void> {
  await deleteMemberSessions(tx, { workspaceId });
  await deleteWorkspaceMembers(tx, workspaceId);
}
