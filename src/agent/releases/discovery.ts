// Which kinds the cluster serves, from the API server's discovery documents (GET /api/v1,
// /apis/<group>/<version>): a release may hold any allow-listed kind, including custom ones, so
// the REST path (plural) and scope of a kind are looked up, never guessed from its name. A
// group/version the cluster does not serve (its CRD is missing) is remembered as such for a
// while, so a release naming it shows a clear per-object status without a request per reconcile;
// it is looked up again after MISSING_TTL_MS (the CRD may have been installed since).
import type { KubeClient } from "../../kube/client.js";
import { isNotFound } from "../../kube/client.js";
import { isRecord } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import type { KindRef } from "./render.js";

export const MISSING_TTL_MS = 30_000;

export type Resolution = { type: "served"; resource: ResourceType } | { type: "missing"; reason: string };

interface Entry {
  at: number;
  kinds: Map<string, ResourceType> | null;
}

export class Discovery {
  readonly #kube: Pick<KubeClient, "raw">;
  readonly #now: () => number;
  readonly #groups = new Map<string, Entry>();
  readonly #inflight = new Map<string, Promise<Entry>>();

  constructor(kube: Pick<KubeClient, "raw">, now: () => number = Date.now) {
    this.#kube = kube;
    this.#now = now;
  }

  async resolve(k: KindRef, signal?: AbortSignal): Promise<Resolution> {
    const gv = k.group === "" ? k.version : `${k.group}/${k.version}`;
    let e = this.#groups.get(gv);
    const stale = e !== undefined && e.kinds === null && this.#now() - e.at > MISSING_TTL_MS;
    const lacks =
      e?.kinds !== null && e?.kinds !== undefined && !e.kinds.has(k.kind) && this.#now() - e.at > MISSING_TTL_MS;
    if (e === undefined || stale || lacks) e = await this.#load(k, gv, signal);
    if (e.kinds === null)
      return {
        type: "missing",
        reason: `the cluster does not serve ${gv} (is its CustomResourceDefinition installed?)`,
      };
    const r = e.kinds.get(k.kind);
    if (!r) return { type: "missing", reason: `the cluster serves ${gv} but not the kind ${k.kind}` };
    return { type: "served", resource: r };
  }

  /** The served kind, if it was resolved before (no request). */
  cached(k: KindRef): ResourceType | undefined {
    return this.#groups.get(k.group === "" ? k.version : `${k.group}/${k.version}`)?.kinds?.get(k.kind);
  }

  #load(k: KindRef, gv: string, signal?: AbortSignal): Promise<Entry> {
    let p = this.#inflight.get(gv);
    if (!p) {
      p = this.#fetch(k, gv, signal).finally(() => this.#inflight.delete(gv));
      this.#inflight.set(gv, p);
    }
    return p;
  }

  async #fetch(k: KindRef, gv: string, signal?: AbortSignal): Promise<Entry> {
    const path = k.group === "" ? `/api/${k.version}` : `/apis/${k.group}/${k.version}`;
    let body: unknown;
    try {
      body = await this.#kube.raw("GET", path, undefined, signal);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      const e: Entry = { at: this.#now(), kinds: null };
      this.#groups.set(gv, e);
      return e;
    }
    const kinds = new Map<string, ResourceType>();
    const list = isRecord(body) && Array.isArray(body.resources) ? body.resources : [];
    for (const r of list) {
      if (!isRecord(r) || typeof r.name !== "string" || typeof r.kind !== "string" || r.name.includes("/")) continue;
      kinds.set(r.kind, {
        group: k.group,
        version: k.version,
        kind: r.kind,
        plural: r.name,
        namespaced: r.namespaced === true,
      });
    }
    const e: Entry = { at: this.#now(), kinds };
    this.#groups.set(gv, e);
    return e;
  }
}
