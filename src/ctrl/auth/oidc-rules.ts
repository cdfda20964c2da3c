// The pure rules of sign-in (./oidc.ts): the groups-to-roles map of --oidc-group-role, and where
// the provider may send a sign-in back.
import { higherRole, isRoleName, type RoleName } from "../../contracts/roles.js";
import { invalidArgument } from "../errors.js";

/** A group of the provider's `groups` claim giving a role: in one workspace, or in any signed into. */
export interface GroupRole {
  group: string;
  /** A workspace slug; undefined: whichever workspace the sign-in is for. */
  workspace?: string;
  role: RoleName;
}

/** `group=role` or `group=workspace:role` (--oidc-group-role), or invalid_argument naming the flag. */
export function parseGroupRole(v: string): GroupRole {
  const m = /^([^=]+)=(?:([a-z0-9][a-z0-9-]*):)?([a-z]+)$/.exec(v.trim());
  const role = m?.[3];
  if (!m || m[1] === undefined || role === undefined || !isRoleName(role))
    throw invalidArgument(
      "--oidc-group-role",
      `"${v.slice(0, 80)}" is not group=role or group=workspace:role (roles: viewer, developer, admin, owner)`,
    );
  return m[2] === undefined ? { group: m[1].trim(), role } : { group: m[1].trim(), workspace: m[2], role };
}

/** The highest role the groups give in a workspace; null: none. */
export function groupRoleIn(
  groups: readonly string[],
  workspaceSlug: string,
  map: readonly GroupRole[],
): RoleName | null {
  let best: RoleName | null = null;
  for (const g of map)
    if (groups.includes(g.group) && (g.workspace === undefined || g.workspace === workspaceSlug))
      best = higherRole(best, g.role);
  return best;
}

/**
 * Where the provider may send a sign-in back: the CLI's loopback listener (RFC 8252: http on
 * 127.0.0.1 or [::1], any port) or an https URL ctrl itself answers (`allowed`, the dashboard's).
 */
export function checkRedirectUri(v: string, allowed: readonly string[] = []): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw invalidArgument("redirect_uri", "not a URL");
  }
  if (u.hash !== "" || u.search !== "") throw invalidArgument("redirect_uri", "takes no query or fragment");
  const loopback = u.protocol === "http:" && (u.hostname === "127.0.0.1" || u.hostname === "[::1]");
  if (!loopback && !allowed.includes(u.href))
    throw invalidArgument("redirect_uri", "must be http://127.0.0.1:<port>/… (the CLI's) or the dashboard's");
  return u.href;
}
