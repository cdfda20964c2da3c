// A kind's agent reports, checked and recorded the same way for every kind. Each report request
// has a `change` oneof of update, delete and rejected, and each change names its object by the
// kind's id field (`deployment_id`, …) — and, for kinds whose agent may know an object only by
// its Kubernetes name, by `k8s_name` as well. The delete and rejected changes mean the same for
// every kind and are checked here once; a kind checks only its update's own fields, and names the
// owner in ../domain that records the result.
import type { DescMessage } from "@bufbuild/protobuf";
import type { Store } from "../db/store.js";
import { invalidArgument } from "../errors.js";
import { rejectionReason, reportSubject } from "../validate/cluster.js";
import * as r from "../validate/rules.js";

/** What a report is about: the object's id (may be empty) and its Kubernetes name (may be empty). */
export interface ReportSubject {
  id: string;
  k8sName: string;
}

/** A validated report of any kind: what it is about, and its change (update, delete, rejected). */
export type AnyReport = ReportSubject & { readonly type: string };

/** A report as validated, whatever the kind: what it is about, and the update's own fields. */
export type CheckedReport<U> =
  | ({ type: "update" } & ReportSubject & U)
  | ({ type: "delete" } & ReportSubject)
  | ({ type: "rejected"; reason: string } & ReportSubject);

/** What every change names its object by: the kind's id field `K`, and maybe `k8sName`. */
type Named<K extends string> = Record<K, string> & { k8sName?: string };

/** The `change` oneof of a kind's report request; `K` is its id field (`deploymentId`). */
export type ReportChange<K extends string, U> =
  | { case: "update"; value: U & Named<K> }
  | { case: "delete"; value: Named<K> }
  | { case: "rejected"; value: Named<K> & { reason: string } }
  | { case: undefined; value?: undefined };

/** How one kind's reports are checked and recorded (a descriptor's `report`). */
export interface KindReports<Req, R> {
  /** The kind's report request message (its Report…Status method takes it). */
  readonly message: DescMessage;
  validate(req: Req): R;
  /** Records a validated report in one write transaction. */
  record(store: Store, region: string, report: R): Promise<void>;
}

export interface ReportRules<K extends string, U, V> {
  /** The kind's report request message (`ReportDeploymentStatusRequestSchema`). */
  readonly message: DescMessage;
  /** The id field of every change, as the generated code names it (`deploymentId`). */
  readonly key: K;
  /** The kind's id prefix (`dep`). */
  readonly idPrefix: string;
  /**
   * Changes also carry `k8s_name`, and the id may be empty when the agent knows the object only
   * by that name (it found it in the cluster). Otherwise the id is required and k8sName is "".
   */
  readonly byK8sName: boolean;
  /** Checks the update's own fields (each error names its field, `update.…`). */
  update(u: U): V;
  /** The owner in ../domain that records a validated report. */
  record(store: Store, region: string, report: CheckedReport<V>): Promise<void>;
}

/** A kind's report checking and recording from its rules. */
export function kindReports<K extends string, U, V>(
  rules: ReportRules<K, U, V>,
): KindReports<{ change: ReportChange<K, U> }, CheckedReport<V>> {
  const field = rules.key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  const subject = (change: string, v: Named<K>): ReportSubject =>
    rules.byK8sName
      ? reportSubject(change, field, rules.idPrefix, { id: v[rules.key], k8sName: v.k8sName ?? "" })
      : { id: r.id(`${change}.${field}`, v[rules.key], rules.idPrefix), k8sName: "" };
  return {
    validate(req) {
      const c = req.change;
      switch (c.case) {
        case "update":
          return { type: "update", ...subject("update", c.value), ...rules.update(c.value) };
        case "delete":
          return { type: "delete", ...subject("delete", c.value) };
        case "rejected":
          return {
            type: "rejected",
            ...subject("rejected", c.value),
            reason: rejectionReason("rejected.reason", c.value.reason),
          };
        default:
          throw invalidArgument("change", "is required (update, delete or rejected)");
      }
    },
    message: rules.message,
    record: rules.record,
  };
}
