// Minimal shapes for raw Kubernetes JSON objects. krane reads and writes objects as plain JSON
// (never through client-node's typed model serializer, which drops fields it does not know).
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
  deletionTimestamp?: string;
  creationTimestamp?: string;
  finalizers?: string[];
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface KubeList {
  metadata: { resourceVersion?: string; continue?: string };
  items: KubeObject[];
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function isKubeObject(v: unknown): v is KubeObject {
  return isRecord(v) && isRecord(v.metadata);
}

/** "namespace/name" (or "name" for cluster-scoped objects). */
export function objectKey(o: { metadata: ObjectMeta }): string {
  const ns = o.metadata.namespace;
  return ns ? `${ns}/${o.metadata.name ?? ""}` : (o.metadata.name ?? "");
}
