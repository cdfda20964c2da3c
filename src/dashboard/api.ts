// The dashboard's clients of ctrl's public API: Connect over fetch, the same clients of the same
// services as the CLI's (src/client/services.ts). Same origin, so the browser sends the HttpOnly
// session cookie; the page never sees a token.
import { ConnectError } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { apiClients } from "../client/services.js";
import { all } from "./paging.js";

// Binary: smaller than JSON, and a live view's bytes are encoded once by ctrl for every stream.
export const api = apiClients(createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true }));

/** The slugs of every workspace the session may read (the audit and quotas pages' choice). */
export function workspaceSlugs(): Promise<string[]> {
  return all(async (pageToken) => {
    const r = await api.workspaces.listWorkspaces({ pageToken, pageSize: 1000 });
    return { items: r.workspaces.map((w) => w.slug), next: r.nextPageToken };
  });
}

/** ctrl's own message for a refused call. */
export function errorText(err: unknown): string {
  return ConnectError.from(err).rawMessage;
}

export function isSignedOut(err: unknown): boolean {
  return ConnectError.from(err).code === 16;
}

/** Refusals no retry mends (not found, not allowed, bad request): a stream stops on them. */
export function isFinal(err: unknown): boolean {
  const code = ConnectError.from(err).code;
  return code === 3 || code === 5 || code === 7 || code === 9;
}

export interface Me {
  name: string;
  /** The workspace the session's token is bound to; null: an installation token. */
  workspace: { id: string; slug: string } | null;
  /** The role the session acts with in its workspace; null: an installation token (everything). */
  role: string | null;
  /** The member signed in through the provider; null: an API token's session. */
  member: { email: string } | null;
}

/** Not signed in: whether ctrl offers the sign-in through its OpenID provider. */
export interface SignedOut {
  signedOut: true;
  oidc: { issuer: string } | null;
}

export async function whoAmI(): Promise<Me | SignedOut> {
  const res = await fetch("/dashboard/session", { credentials: "same-origin" });
  if (res.ok) return (await res.json()) as Me;
  const body = (await res.json().catch(() => ({}))) as { oidc?: { issuer: string } | null };
  return { signedOut: true, oidc: body.oidc ?? null };
}

/** Signs in: the token goes in this POST's body only, and is not kept. */
export async function signIn(token: string): Promise<string | undefined> {
  const res = await fetch("/dashboard/session", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token }),
  });
  if (res.ok) return undefined;
  const body = (await res.json().catch(() => ({}))) as { message?: string };
  return body.message ?? `sign-in failed (${res.status})`;
}

export async function signOut(): Promise<void> {
  await fetch("/dashboard/session", { method: "DELETE", credentials: "same-origin" });
}
