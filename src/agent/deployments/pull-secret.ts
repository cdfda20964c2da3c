// A workspace namespace's pull Secret (kubernetes.io/dockerconfigjson): the workspace's private
// registry credentials, which the pods of its deployments and cron jobs name in imagePullSecrets.
// Its content never rides a desired state: the payload names the Secret and a version (which
// changes with the credentials), and the agent fetches the content from ctrl (GetSecretValues)
// only to write it. One Secret per namespace, written with server-side apply (every region's
// agent on a cluster writes the same content), labelled as krane's so the fence lets the agent
// write it and no other; the agent cannot read Secrets, so it remembers which version it wrote
// in this process, and the workload's rendered version annotation makes a new version (or none)
// a change the kind applies. The last credential removed: the workloads render without it, and
// the agent deletes the Secret by the name their live template still gives.
import type { PullSecret } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { PULL_SECRET_KEY } from "../../contracts/images.js";
import { COMPONENT, workspaceObjectLabels } from "../../contracts/labels.js";
import type { KubeClient } from "../../kube/client.js";
import type { KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";

/** On a workload (ReplicaSet, CronJob): the pull Secret's version its pods were rendered with. */
export const ANNOTATION_PULL_SECRET_VERSION = "krane.dev/pull-secret-version";

/** The pod spec's part: imagePullSecrets naming the workspace's pull Secret, when it has one. */
export function pullSecretPodParts(p: PullSecret | undefined): { imagePullSecrets?: { name: string }[] } {
  return p ? { imagePullSecrets: [{ name: p.secretName }] } : {};
}

/** The workload's metadata annotation carrying the version (none without a pull Secret). */
export function pullSecretAnnotation(p: PullSecret | undefined): Record<string, string> {
  return p ? { [ANNOTATION_PULL_SECRET_VERSION]: p.version } : {};
}

/** The pull Secret with its content (fetched from ctrl, never cached or logged). */
export function renderPullSecret(
  p: PullSecret,
  namespace: string,
  values: readonly { key: string; value: Uint8Array }[],
): KubeObject {
  const data: Record<string, string> = {};
  for (const v of values) if (v.key === PULL_SECRET_KEY) data[v.key] = Buffer.from(v.value).toString("base64");
  if (data[PULL_SECRET_KEY] === undefined) throw new Error(`ctrl answered no ${PULL_SECRET_KEY} for the pull Secret`);
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "kubernetes.io/dockerconfigjson",
    // No region label: every region's agent on a cluster writes this one object.
    metadata: {
      name: p.secretName,
      namespace,
      labels: workspaceObjectLabels(COMPONENT.pullSecret),
    },
    data,
  };
}

/** The pull Secret a live workload's pods name ("" when none): a ReplicaSet's or a CronJob's template. */
export function pullSecretNameOf(obj: KubeObject | undefined): string {
  type PodSpec = { imagePullSecrets?: { name?: unknown }[] };
  const spec = obj?.spec as
    { template?: { spec?: PodSpec }; jobTemplate?: { spec?: { template?: { spec?: PodSpec } } } } | undefined;
  const pod = spec?.template?.spec ?? spec?.jobTemplate?.spec?.template?.spec;
  const name = pod?.imagePullSecrets?.[0]?.name;
  return typeof name === "string" ? name : "";
}

/** What the pull Secret of one workload needs: where, and how to fetch its content. */
export interface PullSecretWant {
  readonly namespace: string;
  /** The payload's pull Secret; undefined when the workspace has no credential. */
  readonly pullSecret: PullSecret | undefined;
  /** The workload as it runs now (its template names the Secret it had). */
  readonly live: KubeObject | undefined;
  readonly fetch: (signal: AbortSignal) => Promise<readonly { key: string; value: Uint8Array }[]>;
}

/** The pull Secrets a kind wrote in this process (namespace/name → version). */
export class PullSecrets {
  readonly #written = new Map<string, string>();

  /** Writes the Secret when this process has not written its version yet; deletes it when it went. */
  async ensure(kube: KubeClient, w: PullSecretWant, signal: AbortSignal): Promise<void> {
    if (w.pullSecret) {
      const id = `${w.namespace}/${w.pullSecret.secretName}`;
      if (this.#written.get(id) === w.pullSecret.version) return;
      const values = await w.fetch(signal);
      await kube.apply(resources.secrets, renderPullSecret(w.pullSecret, w.namespace, values), {
        force: true,
        signal,
      });
      this.#written.set(id, w.pullSecret.version);
      return;
    }
    const had = pullSecretNameOf(w.live);
    if (had === "") return;
    // The fence refuses a delete of a Secret krane did not label: never another's.
    await kube.delete(resources.secrets, w.namespace, had, signal);
    this.#written.delete(`${w.namespace}/${had}`);
  }
}
