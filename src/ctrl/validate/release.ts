// Validation of a release's manifests (ReleaseService.ApplyRelease), before anything is stored
// or applied: every document must be YAML (or JSON) describing one object with apiVersion, kind
// and metadata.name, of a kind on the platform's allow-list and never a cluster-scoped one, in
// the environment's workspace namespace (a missing namespace means that one; another is refused),
// each identity (group/Kind/name) once. `kind: List` documents are expanded. Limits: 500 objects,
// 4 MiB of manifests per request (ctrl's request limit), 256 KiB per object.
//
// What is normalised: the namespace is set; pod templates get the user workloads' isolation
// (RuntimeClass gvisor, untrusted nodes and their toleration, no ServiceAccount token), which the
// agent's admission fence requires of every pod it writes in a workspace namespace; a
// ServiceAccount gets automountServiceAccountToken false. Errors name the file, the document and
// the field, never a Secret's value.
import { parseAllDocuments } from "yaml";
import { NODE_CLASS, NODE_CLASS_LABEL, nodeClassToleration, RUNTIME_CLASS } from "../../contracts/cluster.js";
import {
  CLUSTER_SCOPED_KINDS,
  RESERVED_KINDS,
  kindName,
  sameKind,
  type AllowedKind,
} from "../../contracts/releases.js";
import { invalidArgument } from "../errors.js";

export const RELEASE_LIMITS = { objectsMax: 500, objectBytesMax: 256 * 1024, filesMax: 1000 } as const;

export type Json = Record<string, unknown>;

export interface ReleaseObjectInput {
  /** group/Kind/name. */
  id: string;
  group: string;
  version: string;
  kind: string;
  name: string;
  /** The normalised object (a Secret still with its data: the domain seals it). */
  object: Json;
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function splitApiVersion(field: string, v: unknown): { group: string; version: string } {
  if (typeof v !== "string" || v === "") throw invalidArgument(field, "apiVersion is required");
  const parts = v.split("/");
  if (parts.length === 1 && /^v[0-9a-z]+$/.test(v)) return { group: "", version: v };
  if (parts.length === 2 && parts[0] && parts[1] && DNS_SUBDOMAIN.test(parts[0]) && /^v[0-9a-z]+$/.test(parts[1]))
    return { group: parts[0], version: parts[1] };
  throw invalidArgument(field, `apiVersion "${v.slice(0, 100)}" is not group/version`);
}

/** The pod spec locations a workload kind keeps (the fence checks the same ones). */
function podSpecs(o: Json): Json[] {
  const out: Json[] = [];
  const spec = o.spec;
  if (!isObject(spec)) return out;
  const t = spec.template;
  if (isObject(t) && isObject(t.spec)) out.push(t.spec);
  const jt = spec.jobTemplate;
  if (isObject(jt) && isObject(jt.spec) && isObject(jt.spec.template) && isObject(jt.spec.template.spec))
    out.push(jt.spec.template.spec);
  return out;
}

function isolate(podSpec: Json): void {
  podSpec.runtimeClassName = RUNTIME_CLASS;
  podSpec.automountServiceAccountToken = false;
  const selector = isObject(podSpec.nodeSelector) ? podSpec.nodeSelector : {};
  podSpec.nodeSelector = { ...selector, [NODE_CLASS_LABEL]: NODE_CLASS.untrusted };
  const tolerations = Array.isArray(podSpec.tolerations)
    ? podSpec.tolerations.filter((t) => !(isObject(t) && t.key === NODE_CLASS_LABEL))
    : [];
  podSpec.tolerations = [...tolerations, nodeClassToleration(NODE_CLASS.untrusted)];
}

function normalise(field: string, o: Json, group: string, kind: string): void {
  for (const spec of podSpecs(o)) {
    const sa = spec.serviceAccountName ?? spec.serviceAccount;
    if (sa !== undefined && sa !== "default")
      throw invalidArgument(`${field}.spec`, "pods of a release run with the default ServiceAccount (no API token)");
    isolate(spec);
  }
  if (group === "" && kind === "ServiceAccount") {
    if (o.automountServiceAccountToken === true)
      throw invalidArgument(`${field}.automountServiceAccountToken`, "must be false: release pods get no API token");
    if (Array.isArray(o.secrets) && o.secrets.length > 0)
      throw invalidArgument(`${field}.secrets`, "a release ServiceAccount lists no secrets");
    o.automountServiceAccountToken = false;
  }
  if (group === "" && kind === "Secret" && o.type === "kubernetes.io/service-account-token") {
    throw invalidArgument(`${field}.type`, "ServiceAccount token Secrets are not allowed");
  }
}

/**
 * Parses and checks a release's files. `namespace` is the environment's workspace namespace;
 * `allowed` the platform's allow-list.
 */
export function validateReleaseFiles(
  files: readonly { name: string; content: string }[],
  namespace: string,
  allowed: readonly AllowedKind[],
): ReleaseObjectInput[] {
  if (files.length === 0) throw invalidArgument("files", "must hold at least one manifest");
  if (files.length > RELEASE_LIMITS.filesMax)
    throw invalidArgument("files", `must be at most ${RELEASE_LIMITS.filesMax} files`);
  const out: ReleaseObjectInput[] = [];
  const ids = new Map<string, string>();
  for (const [fi, file] of files.entries()) {
    const where = `files[${fi}] (${file.name.slice(0, 200) || "unnamed"})`;
    const docs = parseAllDocuments(file.content, { uniqueKeys: true, prettyErrors: false });
    const list = Array.isArray(docs) ? docs : [docs];
    for (const [di, doc] of list.entries()) {
      const field = `${where} document ${di + 1}`;
      if (doc.errors.length > 0)
        throw invalidArgument(field, `is not YAML: ${doc.errors[0]?.message.split("\n")[0] ?? "parse error"}`);
      let value: unknown;
      try {
        value = doc.toJS({ maxAliasCount: 100 });
      } catch (err) {
        throw invalidArgument(field, `is not YAML: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
      }
      if (value === null || value === undefined) continue;
      if (!isObject(value))
        throw invalidArgument(field, "must be a Kubernetes object (a mapping with apiVersion, kind and metadata)");
      const items = value.kind === "List" && Array.isArray(value.items) ? value.items : [value];
      for (const [ii, item] of items.entries()) {
        const f = items.length > 1 || value.kind === "List" ? `${field} items[${ii}]` : field;
        out.push(checkObject(f, item, namespace, allowed, ids));
        if (out.length > RELEASE_LIMITS.objectsMax)
          throw invalidArgument("files", `a release holds at most ${RELEASE_LIMITS.objectsMax} objects`);
      }
    }
  }
  if (out.length === 0) throw invalidArgument("files", "hold no object");
  return out;
}

function checkObject(
  field: string,
  v: unknown,
  namespace: string,
  allowed: readonly AllowedKind[],
  ids: Map<string, string>,
): ReleaseObjectInput {
  if (!isObject(v)) throw invalidArgument(field, "must be a Kubernetes object");
  const { group, version } = splitApiVersion(`${field}.apiVersion`, v.apiVersion);
  const kind = v.kind;
  if (typeof kind !== "string" || !/^[A-Z][A-Za-z0-9]{0,62}$/.test(kind))
    throw invalidArgument(`${field}.kind`, "kind is required (e.g. ConfigMap)");
  const k = { group, kind };
  if (CLUSTER_SCOPED_KINDS.some((c) => sameKind(c, k)))
    throw invalidArgument(
      `${field}.kind`,
      `${kindName(k)} is cluster-scoped: a release holds only objects of its workspace namespace`,
    );
  if (RESERVED_KINDS.some((c) => sameKind(c, k)))
    throw invalidArgument(
      `${field}.kind`,
      `${kindName(k)} is krane's own (the workspace's quota backstop): a release cannot hold one`,
    );
  if (!allowed.some((a) => sameKind(a, k))) {
    throw invalidArgument(
      `${field}.kind`,
      `${kindName(k)} is not on the platform's allow-list (${allowed.map(kindName).join(", ")})`,
    );
  }
  const meta = v.metadata;
  if (!isObject(meta)) throw invalidArgument(`${field}.metadata`, "metadata.name is required");
  const name = meta.name;
  if (typeof name !== "string" || name.length > 253 || !DNS_SUBDOMAIN.test(name))
    throw invalidArgument(
      `${field}.metadata.name`,
      "must be a DNS subdomain name (lowercase letters, digits, '-' and '.')",
    );
  if (meta.generateName !== undefined)
    throw invalidArgument(
      `${field}.metadata.generateName`,
      "is not supported: give every object a name, so it can be updated and pruned",
    );
  if (meta.namespace !== undefined && meta.namespace !== namespace) {
    throw invalidArgument(
      `${field}.metadata.namespace`,
      `objects go into the environment's namespace "${namespace}", not "${String(meta.namespace).slice(0, 100)}"`,
    );
  }
  const id = `${group}/${kind}/${name}`;
  const seen = ids.get(id);
  if (seen !== undefined)
    throw invalidArgument(`${field}.metadata.name`, `${kindName(k)} "${name}" is also defined at ${seen}`);
  ids.set(id, field);
  const object: Json = structuredClone(v);
  const {
    uid: _u,
    resourceVersion: _rv,
    creationTimestamp: _c,
    managedFields: _m,
    selfLink: _s,
    generation: _g,
    ownerReferences: _o,
    finalizers: _f,
    deletionTimestamp: _d,
    ...keep
  } = meta;
  object.metadata = { ...keep, namespace };
  delete object.status;
  normalise(field, object, group, kind);
  if (Buffer.byteLength(JSON.stringify(object), "utf8") > RELEASE_LIMITS.objectBytesMax)
    throw invalidArgument(field, `is larger than ${RELEASE_LIMITS.objectBytesMax / 1024} KiB`);
  return { id, group, version, kind, name, object };
}
