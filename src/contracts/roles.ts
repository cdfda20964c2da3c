// The roles of a workspace's members and service accounts by name, as ctrl stores them, the API
// spells them and the CLI and the dashboard show them, ranked as the proto's Role enum ranks them
// (proto/krane/ctrl/v1/policy.proto: each role allows what the ones before it allow). Pure.
export const ROLE_NAMES = ["viewer", "developer", "admin", "owner"] as const;

export type RoleName = (typeof ROLE_NAMES)[number];

/** 1 (viewer) … 4 (owner): the Role enum's number. */
export function roleRank(role: RoleName): number {
  return ROLE_NAMES.indexOf(role) + 1;
}

/** The role of a Role enum number; undefined for ROLE_UNSPECIFIED or an unknown number. */
export function roleOfRank(rank: number): RoleName | undefined {
  return ROLE_NAMES[rank - 1];
}

export function isRoleName(v: string): v is RoleName {
  return (ROLE_NAMES as readonly string[]).includes(v);
}

/** The higher of two roles (either may be none). */
export function higherRole(a: RoleName | null, b: RoleName | null): RoleName | null {
  if (a === null) return b;
  if (b === null) return a;
  return roleRank(a) >= roleRank(b) ? a : b;
}

/** Whether `have` allows what `need` allows. */
export function allows(have: RoleName, need: RoleName): boolean {
  return roleRank(have) >= roleRank(need);
}

/** "a viewer", "an admin", "an owner". */
export function withArticle(role: RoleName): string {
  return `${/^[aeiou]/.test(role) ? "an" : "a"} ${role}`;
}
