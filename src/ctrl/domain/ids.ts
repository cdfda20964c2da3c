// Identifiers and Kubernetes names.
//
// Ids are a type prefix and 20 random base-36 characters (`dep_k3j…`), so they are readable in
// logs and unambiguous about their type. Kubernetes names are derived once at creation and
// stored: the workspace namespace is a DNS-1123 label (`ws-<slug>`), deployment and sentinel
// names are DNS-1035 labels (`<project>-<env>-<8 random chars>`), unique per object.
import { randomBytes } from "node:crypto";

export type IdPrefix =
  | "ws"
  | "alr"
  | "key"
  | "prj"
  | "env"
  | "dep"
  | "snt"
  | "cls"
  | "tok"
  | "rel"
  | "job"
  | "dek"
  | "aud"
  | "ept"
  | "dom"
  | "pvw"
  | "pwh"
  | "req"
  | "rcr"
  | "nch"
  | "nev"
  | "bld"
  | "rep";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

export function randomChars(n: number): string {
  const bytes = randomBytes(n * 2);
  let out = "";
  for (let i = 0; i < bytes.length && out.length < n; i++) {
    const b = bytes[i] ?? 0;
    // 252 = 7 * 36: reject the tail to keep the distribution uniform.
    if (b < 252) out += ALPHABET[b % 36];
  }
  return out.length === n ? out : out + randomChars(n - out.length);
}

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomChars(20)}`;
}

export function workspaceNamespace(slug: string): string {
  return `ws-${slug}`;
}

function trimLabelPart(s: string, max: number): string {
  return s.slice(0, max).replace(/-+$/, "");
}

/**
 * `<project>-<env>-<suffix>`, at most 63 characters, starting with a letter (slugs do) and never
 * ending in '-'. The suffix makes it unique; the slugs make it readable.
 */
export function objectK8sName(projectSlug: string, envSlug: string, suffix: string, prefix = ""): string {
  const name = `${prefix}${trimLabelPart(projectSlug, 24)}-${trimLabelPart(envSlug, 24)}-${suffix}`;
  return name.slice(0, 63).replace(/-+$/, "");
}

export function deploymentK8sName(projectSlug: string, envSlug: string): string {
  return objectK8sName(projectSlug, envSlug, randomChars(8));
}

export function sentinelK8sName(projectSlug: string, envSlug: string): string {
  return objectK8sName(projectSlug, envSlug, randomChars(8), "snt-");
}
