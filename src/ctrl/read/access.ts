// A workspace's members and service accounts, for the API's lists (keyset pages).
import type { Kysely } from "kysely";
import type { Database, MemberRow, ServiceAccountRow } from "../db/schema.js";
import { limitToPage, takePage, type Page, type PageQuery } from "./page.js";

type Reader = Kysely<Database>;

/** By email address; a page's key is the last member's. */
export async function listMembers(db: Reader, workspaceId: string, page?: PageQuery<string>): Promise<Page<MemberRow>> {
  let q = db.selectFrom("members").selectAll().where("workspace_id", "=", workspaceId);
  if (page?.after !== undefined) q = q.where("email", ">", page.after);
  return takePage(await limitToPage(q, page).orderBy("email").execute(), page);
}

/** By name; a page's key is the last service account's. */
export async function listServiceAccounts(
  db: Reader,
  workspaceId: string,
  page?: PageQuery<string>,
): Promise<Page<ServiceAccountRow>> {
  let q = db.selectFrom("service_accounts").selectAll().where("workspace_id", "=", workspaceId);
  if (page?.after !== undefined) q = q.where("name", ">", page.after);
  return takePage(await limitToPage(q, page).orderBy("name").execute(), page);
}

/** The ids of a member's API tokens (a role change drops their cached lookups at once). */
export async function tokenIdsOfMember(db: Reader, memberId: string): Promise<string[]> {
  const rows = await db.selectFrom("api_tokens").select("id").where("member_id", "=", memberId).execute();
  // And their sign-in sessions (mss_…), which the Authenticator caches the same way.
  const sessions = await db.selectFrom("member_sessions").select("id").where("member_id", "=", memberId).execute();
  return [...rows, ...sessions].map((r) => r.id);
}
