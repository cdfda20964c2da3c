// Drift detection: does a live object differ from the rendered one in the fields krane sets?
//
// krane applies complete intents with server-side apply, so the fields it owns are exactly the
// fields of the rendered object. A live object matches when every rendered field is present
// with an equal value; extra live fields (API-server defaults, status, other managers' fields)
// are ignored. Lists must have the same length and match element-wise. Quantities are compared
// by value because the API server canonicalises them ("1024Mi" is stored as "1Gi"). A rendered
// `null` means "this field must be absent" (a list that became empty: the API server drops
// empty lists, and server-side apply removes a field its manager no longer sets).
// When nothing drifted the resync therefore writes nothing.
import { parseQuantity } from "../../kube/quantity.js";

/** The path of the first owned field that differs, or undefined when the live object matches. */
export function findDrift(rendered: unknown, live: unknown): string | undefined {
  // The common answer (no drift) without building a path for every field; the path is only
  // worked out when something differs.
  return matches(rendered, live) ? undefined : driftPath(rendered, live, "");
}

/** Whether `live` has every field of `rendered` with an equal value (no allocation). */
function matches(rendered: unknown, live: unknown): boolean {
  if (rendered === undefined) return true;
  if (rendered === null) return live === undefined || live === null;
  if (typeof rendered !== "object") {
    if (rendered === live) return true;
    return typeof rendered === "string" && typeof live === "string" && sameQuantity(rendered, live);
  }
  if (Array.isArray(rendered)) {
    if (!Array.isArray(live) || live.length !== rendered.length) return false;
    for (let i = 0; i < rendered.length; i++) if (!matches(rendered[i], live[i])) return false;
    return true;
  }
  if (typeof live !== "object" || live === null || Array.isArray(live)) return false;
  const r = rendered as Record<string, unknown>;
  const l = live as Record<string, unknown>;
  for (const k in r) if (!matches(r[k], l[k])) return false;
  return true;
}

function sameQuantity(a: string, b: string): boolean {
  const x = parseQuantity(a);
  return x !== undefined && x === parseQuantity(b);
}

function driftPath(rendered: unknown, live: unknown, path: string): string | undefined {
  if (rendered === undefined) return undefined;
  if (rendered === null) return live === undefined || live === null ? undefined : path || "/";
  if (Array.isArray(rendered)) {
    if (!Array.isArray(live) || live.length !== rendered.length) return path || "/";
    for (let i = 0; i < rendered.length; i++) {
      const d = driftPath(rendered[i], live[i], `${path}[${i}]`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  if (typeof rendered === "object" && rendered !== null) {
    if (typeof live !== "object" || live === null || Array.isArray(live)) return path || "/";
    const l = live as Record<string, unknown>;
    for (const [k, v] of Object.entries(rendered as Record<string, unknown>)) {
      const d = driftPath(v, l[k], `${path}.${k}`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  if (rendered === live) return undefined;
  if (typeof rendered === "string" && typeof live === "string") {
    const a = parseQuantity(rendered);
    const b = parseQuantity(live);
    if (a !== undefined && b !== undefined && a === b) return undefined;
  }
  return path || "/";
}
