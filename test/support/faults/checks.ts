// What every fault scenario checks at its end, from outside the parts it broke:
//  - appliedInOrder: the replica counts a ReplicaSet went through (seen by an admin watch on the
//    API server) follow the order ctrl desired them in (its outbox): a later desired state never
//    lands before an earlier one (skipping intermediate states is fine, going back is not);
//  - outboxIntegrity: each stream's versions are dense and unique, and replaying the outbox gives
//    exactly the stored desired state (no change acknowledged without its outbox row, none twice);
//  - ReplicaSetSampler: every ReplicaSet event of a namespace as it happens, with the environment's
//    total spec.replicas after each (the surge bound is checked against that), and one ReplicaSet
//    per deployment (no duplicates).
import { fromBinary } from "@bufbuild/protobuf";
import { ApplyDeploymentSchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import type { Kysely } from "kysely";
import type { Database } from "../../../src/ctrl/db/schema.js";
import { LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID } from "../../../src/contracts/labels.js";
import { Informer } from "../../../src/kube/informer.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../../src/kube/object.js";
import { resources } from "../../../src/kube/resources.js";

/** Whether `observed` (consecutive repeats collapsed) is a subsequence of `desired`; where it first is not. */
export function appliedInOrder(
  desired: readonly number[],
  observed: readonly number[],
): { ok: true } | { ok: false; at: number } {
  let i = 0;
  let prev: number | undefined;
  for (let j = 0; j < observed.length; j++) {
    const v = observed[j];
    if (v === prev) continue;
    prev = v;
    while (i < desired.length && desired[i] !== v) i++;
    if (i === desired.length) return { ok: false, at: j };
    i++;
  }
  return { ok: true };
}

export interface OutboxReport {
  streams: number;
  versions: number;
  problems: string[];
}

/** Dense unique versions per stream, and outbox replay equal to desired_objects. */
export async function outboxIntegrity(db: Kysely<Database>): Promise<OutboxReport> {
  const problems: string[] = [];
  const heads = await db.selectFrom("stream_versions").selectAll().execute();
  let versions = 0;
  for (const h of heads) {
    const rows = await db
      .selectFrom("outbox")
      .select(["version", "object_id", "op", "payload"])
      .where("region", "=", h.region)
      .where("kind", "=", h.kind)
      .orderBy("version")
      .execute();
    versions += rows.length;
    const from = Number(h.compacted_through);
    const expected = Number(h.version) - from;
    if (rows.length !== expected)
      problems.push(`${h.region}/${h.kind}: ${rows.length} rows for versions ${from + 1}..${h.version}`);
    rows.forEach((r, i) => {
      if (Number(r.version) !== from + 1 + i)
        problems.push(`${h.region}/${h.kind}: version ${r.version} at position ${i + 1} (gap or duplicate)`);
    });
    if (from > 0) continue;
    const replay = new Map<string, string>();
    for (const r of rows) {
      if (r.op === "delete") replay.delete(r.object_id);
      else replay.set(r.object_id, Buffer.from(r.payload).toString("hex"));
    }
    const stored = await db
      .selectFrom("desired_objects")
      .select(["object_id", "payload"])
      .where("region", "=", h.region)
      .where("kind", "=", h.kind)
      .execute();
    const want = new Map(stored.map((s) => [s.object_id, Buffer.from(s.payload).toString("hex")]));
    for (const [id, p] of want)
      if (replay.get(id) !== p)
        problems.push(
          `${h.region}/${h.kind}/${id}: the outbox replays to ${replay.has(id) ? "another payload" : "nothing"}`,
        );
    for (const id of replay.keys())
      if (!want.has(id)) problems.push(`${h.region}/${h.kind}/${id}: in the outbox replay but not desired`);
  }
  return { streams: heads.length, versions, problems };
}

/** The replica counts ctrl desired for a deployment in a region, in outbox order. */
export async function desiredHistory(db: Kysely<Database>, region: string, deploymentId: string): Promise<number[]> {
  const rows = await db
    .selectFrom("outbox")
    .select(["op", "payload"])
    .where("region", "=", region)
    .where("kind", "=", "deployment")
    .where("object_id", "=", deploymentId)
    .orderBy("version")
    .execute();
  return rows.filter((r) => r.op !== "delete").map((r) => fromBinary(ApplyDeploymentSchema, r.payload).replicas);
}

export interface RsEvent {
  readonly at: number;
  readonly type: string;
  readonly deploymentId: string;
  readonly name: string;
  readonly replicas: number;
  /** The environment's total spec.replicas after this event. */
  readonly total: number;
}

/** Watches a namespace's ReplicaSets (as an admin, straight to the API server) and records every change. */
export class ReplicaSetSampler {
  readonly events: RsEvent[] = [];
  readonly #informer: Informer;
  readonly #ac = new AbortController();
  readonly #running: Promise<void>;

  constructor(
    kube: KubeClient,
    namespace: string,
    readonly environmentId: string,
  ) {
    this.#informer = new Informer({
      resource: resources.replicaSets,
      labelSelector: `${LABEL_ENVIRONMENT_ID}=${environmentId}`,
      namespace,
      client: kube,
      log: { warn() {} },
      timeoutSeconds: 60,
    });
    this.#informer.onChange((type, obj) => {
      this.events.push({
        at: Date.now(),
        type,
        deploymentId: obj.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "",
        name: obj.metadata.name ?? "",
        replicas: specReplicas(obj),
        total: this.total(),
      });
    });
    this.#running = this.#informer.run(this.#ac.signal);
  }

  synced(): Promise<void> {
    return this.#informer.waitSynced();
  }

  /** The current ReplicaSets. */
  list(): KubeObject[] {
    return this.#informer.list();
  }

  total(): number {
    return this.#informer.list().reduce((n, o) => n + specReplicas(o), 0);
  }

  maxTotal(since = 0): number {
    return this.events.filter((e) => e.at >= since).reduce((m, e) => Math.max(m, e.total), 0);
  }

  /** The spec.replicas values a deployment's ReplicaSet went through. */
  historyOf(deploymentId: string): number[] {
    return this.events.filter((e) => e.deploymentId === deploymentId && e.type !== "deleted").map((e) => e.replicas);
  }

  /** Deployment ids with more than one ReplicaSet. */
  duplicates(): string[] {
    const count = new Map<string, number>();
    for (const o of this.list()) {
      const id = o.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "";
      count.set(id, (count.get(id) ?? 0) + 1);
    }
    return [...count].filter(([, n]) => n > 1).map(([id]) => id);
  }

  async stop(): Promise<void> {
    this.#ac.abort();
    await this.#running.catch(() => undefined);
  }
}

export function specReplicas(o: KubeObject): number {
  return isRecord(o.spec) && typeof o.spec.replicas === "number" ? o.spec.replicas : 0;
}
