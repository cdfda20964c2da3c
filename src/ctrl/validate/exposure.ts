// Validation of exposure input: endpoints (visibility, path prefix, JWT settings with
// operations and scopes) and custom domains (RFC 1123 hostnames, no wildcards, internationalized
// names only in their ASCII xn-- form). Pure; failures name the request field and nothing is
// applied.
import { domainToASCII } from "node:url";
import type { AddDomainRequest, EndpointAuth, SetEndpointRequest } from "../../gen/krane/ctrl/v1/exposure_pb.js";
import { AUTH_METHODS, PATH_TEMPLATE_RE, SCOPE_RE, jwksUrlProblem, type AuthAction } from "../../contracts/routing.js";
import { invalidArgument } from "../errors.js";
import { validateEnvironmentRef } from "./api.js";
import * as r from "./rules.js";
import type { EnvironmentRef } from "./types.js";

export const VISIBILITIES = ["public", "organization"] as const;
export type Visibility = (typeof VISIBILITIES)[number];

export const EXPOSURE_LIMITS = {
  operationsMax: 256,
  scopesMax: 32,
  audiencesMax: 8,
  urlMax: 2048,
  prefixSegmentsMax: 16,
} as const;

/** An endpoint's JWT settings as stored (endpoints.auth, JSON). */
export interface EndpointAuthSettings {
  jwksUrl: string;
  issuer: string;
  audiences: string[];
  operations: { method: string; path: string; scopes: string[] }[];
  defaultAction: AuthAction;
}

export interface EndpointInput {
  ref: EnvironmentRef;
  visibility: Visibility;
  pathRouting: boolean;
  /** With pathRouting: the prefix given, or undefined for the default "/<project>/<env>". */
  pathPrefix: string | undefined;
  auth: EndpointAuthSettings | null;
}

export function visibility(field: string, v: string): Visibility {
  if (v === "") throw invalidArgument(field, 'is required ("public" or "organization")');
  if (!(VISIBILITIES as readonly string[]).includes(v))
    throw invalidArgument(field, 'must be "public" or "organization"');
  return v as Visibility;
}

/** A path prefix: "/a/b", segments of RFC 3986 unreserved characters, no "." or "..", no trailing "/". */
export function pathPrefix(field: string, v: string): string {
  if (!v.startsWith("/")) throw invalidArgument(field, 'must start with "/"');
  if (v === "/") throw invalidArgument(field, 'must not be "/" (that is a host of its own: leave path_routing off)');
  if (v.length > 256) throw invalidArgument(field, "must be at most 256 characters");
  const segments = v.slice(1).split("/");
  if (segments.length > EXPOSURE_LIMITS.prefixSegmentsMax)
    throw invalidArgument(field, `must have at most ${EXPOSURE_LIMITS.prefixSegmentsMax} segments`);
  for (const s of segments) {
    if (s === "") throw invalidArgument(field, 'must not contain empty segments or end with "/"');
    if (s === "." || s === "..") throw invalidArgument(field, 'must not contain "." or ".." segments');
    if (!/^[A-Za-z0-9._~-]+$/.test(s))
      throw invalidArgument(field, "segments may hold letters, digits and . _ ~ - only");
  }
  return v;
}

/** Whether one prefix covers the other, segment-wise (as Gateway API PathPrefix matches). */
export function prefixesOverlap(a: string, b: string): boolean {
  const sa = a === "/" ? [] : a.slice(1).split("/");
  const sb = b === "/" ? [] : b.slice(1).split("/");
  const n = Math.min(sa.length, sb.length);
  for (let i = 0; i < n; i++) if (sa[i] !== sb[i]) return false;
  return true;
}

function action(field: string, v: string): AuthAction {
  if (v === "" || v === "deny") return "deny";
  if (v === "allow") return "allow";
  throw invalidArgument(field, 'must be "deny" or "allow"');
}

export function endpointAuth(field: string, a: EndpointAuth | undefined): EndpointAuthSettings | null {
  if (a === undefined) return null;
  if (a.jwksUrl === "") throw invalidArgument(`${field}.jwks_url`, "is required");
  if (a.jwksUrl.length > EXPOSURE_LIMITS.urlMax)
    throw invalidArgument(`${field}.jwks_url`, `must be at most ${EXPOSURE_LIMITS.urlMax} characters`);
  const urlProblem = jwksUrlProblem(a.jwksUrl);
  if (urlProblem) throw invalidArgument(`${field}.jwks_url`, urlProblem);
  const issuer = r.text(`${field}.issuer`, a.issuer, 512);
  if (issuer.includes(":") && !URL.canParse(issuer))
    throw invalidArgument(`${field}.issuer`, "must be a URI when it contains ':'");
  r.list(`${field}.audiences`, a.audiences, EXPOSURE_LIMITS.audiencesMax);
  const audiences = a.audiences.map((x, i) => r.text(`${field}.audiences[${i}]`, x, 512, true));
  r.list(`${field}.operations`, a.operations, EXPOSURE_LIMITS.operationsMax);
  const seen = new Set<string>();
  const operations = a.operations.map((op, i) => {
    const f = `${field}.operations[${i}]`;
    const method = op.method.toUpperCase();
    if (!(AUTH_METHODS as readonly string[]).includes(method))
      throw invalidArgument(`${f}.method`, `must be one of ${AUTH_METHODS.join(", ")}`);
    if (!PATH_TEMPLATE_RE.test(op.path))
      throw invalidArgument(
        `${f}.path`,
        'must be a path template such as "/books/{id}" (literal segments and {name} segments)',
      );
    const key = `${method} ${op.path.replace(/\{[^}]*\}/g, "{}")}`;
    if (seen.has(key)) throw invalidArgument(`${f}`, `repeats the operation ${method} ${op.path}`);
    seen.add(key);
    r.list(`${f}.scopes`, op.scopes, EXPOSURE_LIMITS.scopesMax);
    const scopes = op.scopes.map((s, k) => {
      if (!SCOPE_RE.test(s))
        throw invalidArgument(
          `${f}.scopes[${k}]`,
          "must be 1-128 printable ASCII characters without spaces, quotes or backslashes",
        );
      return s;
    });
    return { method, path: op.path, scopes };
  });
  return {
    jwksUrl: a.jwksUrl,
    issuer,
    audiences,
    operations,
    defaultAction: action(`${field}.default_action`, a.defaultAction),
  };
}

export function validateSetEndpoint(req: SetEndpointRequest): EndpointInput {
  const ref = validateEnvironmentRef(req);
  const vis = visibility("visibility", req.visibility);
  if (!req.pathRouting && req.pathPrefix !== "") throw r.requiredWith("path_routing", "path_prefix");
  return {
    ref,
    visibility: vis,
    pathRouting: req.pathRouting,
    pathPrefix: req.pathRouting && req.pathPrefix !== "" ? pathPrefix("path_prefix", req.pathPrefix) : undefined,
    auth: endpointAuth("auth", req.auth),
  };
}

/**
 * A custom domain: an RFC 1123 hostname of at least two labels, lowercased, without a trailing
 * dot. Wildcards are refused (ownership of a whole subtree cannot be proven by one record), and
 * so are internationalized names in Unicode: they must be given in their ASCII (xn--) form, which
 * the message names, so the hostname a user proves is exactly the one that is routed.
 */
export function domainName(field: string, raw: string): string {
  if (raw === "") throw invalidArgument(field, "is required");
  let v = raw.endsWith(".") ? raw.slice(0, -1) : raw;
  if (v.startsWith("*")) throw invalidArgument(field, "must not be a wildcard (prove each hostname separately)");
  // eslint-disable-next-line no-control-regex
  if (/[^\x00-\x7f]/.test(v)) {
    const ascii = domainToASCII(v);
    throw invalidArgument(
      field,
      ascii !== "" ? `must be ASCII: give the internationalized name as ${ascii}` : "must be an ASCII hostname",
    );
  }
  v = v.toLowerCase();
  if (v.length > 253) throw invalidArgument(field, "must be at most 253 characters");
  const labels = v.split(".");
  if (labels.length < 2) throw invalidArgument(field, "must be a fully qualified hostname (e.g. www.example.com)");
  for (const l of labels) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(l))
      throw invalidArgument(
        field,
        `label "${l.slice(0, 63)}" is not an RFC 1123 label (letters, digits, '-', 1-63 characters)`,
      );
    if (l.startsWith("xn--") && domainToASCII(l) !== l)
      throw invalidArgument(field, `label "${l}" is not a valid internationalized (xn--) label`);
  }
  if (/^[0-9]+$/.test(labels[labels.length - 1] ?? ""))
    throw invalidArgument(field, "must be a hostname, not an IP address");
  return v;
}

export interface DomainInput {
  ref: EnvironmentRef;
  hostname: string;
}

export function validateDomainRequest(
  req: Pick<AddDomainRequest, "workspace" | "project" | "environment" | "hostname">,
): DomainInput {
  return { ref: validateEnvironmentRef(req), hostname: domainName("hostname", req.hostname) };
}
