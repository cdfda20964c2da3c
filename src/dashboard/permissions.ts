// What the signed-in session may do, from the same declarations ctrl enforces: each public
// method's proto names the role it needs (proto/krane/ctrl/v1/policy.proto, read from the
// generated descriptors as ctrl's ../ctrl/auth/policy.ts does), so the page holds no table of its
// own. The page hides what the session's role does not allow and says why; ctrl still decides
// every call (a refusal shows ctrl's own message, which names the role needed).
import { getOption, hasOption, type DescMethod } from "@bufbuild/protobuf";
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import { allows, isRoleName, roleOfRank, withArticle, type RoleName } from "../contracts/roles.js";
import { policy, Scope } from "../gen/krane/ctrl/v1/policy_pb.js";

/** The role the session acts with (GET /dashboard/session); null: an installation token, which may do everything. */
export const RoleContext = createContext<string | null>(null);

/** What calling the method needs: a role of the workspace, an installation token, or (undeclared) undefined. */
export function needOf(method: DescMethod): RoleName | "installation" | undefined {
  if (!hasOption(method, policy)) return undefined;
  const p = getOption(method, policy);
  return p.scope === Scope.INSTALLATION ? "installation" : roleOfRank(p.role);
}

/** Why a session with `role` may not call the method (a sentence naming the role needed); undefined: it may. */
export function refusalOf(role: string | null, method: DescMethod): string | undefined {
  if (role === null) return undefined;
  const need = needOf(method);
  // Undeclared: ctrl refuses it to every workspace session; the page leaves the word to ctrl.
  if (need === undefined) return undefined;
  if (need === "installation") return `${method.name} needs an installation token`;
  if (isRoleName(role) && allows(role, need)) return undefined;
  return `${method.name} needs the ${need} role (you are ${isRoleName(role) ? withArticle(role) : role})`;
}

/**
 * The line that says what the page hides from the session and why, by the role each needs:
 * "Deploy, Scale and Roll back need the developer role; you are a viewer." Undefined: nothing hidden.
 */
export function hiddenNote(
  role: string | null,
  actions: readonly (readonly [string, DescMethod])[],
): string | undefined {
  const byNeed = new Map<string, string[]>();
  for (const [label, method] of actions) {
    if (refusalOf(role, method) === undefined) continue;
    const need = needOf(method) ?? "";
    byNeed.set(need, [...(byNeed.get(need) ?? []), label]);
  }
  if (byNeed.size === 0) return undefined;
  const you = role !== null && isRoleName(role) ? withArticle(role) : String(role);
  const parts = [...byNeed].map(([need, labels]) => {
    const list = labels.length === 1 ? labels[0] : `${labels.slice(0, -1).join(", ")} and ${labels.at(-1)}`;
    const what = need === "installation" ? "an installation token" : `the ${need} role`;
    return `${list} ${labels.length === 1 ? "needs" : "need"} ${what}`;
  });
  return `${parts.join("; ")}; you are ${you}.`;
}

/** The session's role (RoleContext) and whether it may call the method. */
export function useMayCall(): (method: DescMethod) => boolean {
  const role = useContext(RoleContext);
  return (method) => refusalOf(role, method) === undefined;
}
