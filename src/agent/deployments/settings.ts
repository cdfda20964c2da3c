// A revision's configuration and secrets in the cluster, pure. Each revision has its
// own immutable objects, named by ctrl with a hash of their content and labelled with the
// revision (deployment id), so they are pruned with it — by revision-history cleanup, an undo's
// retarget, or the revision's deletion — and `rollout undo` finds the old revision's own again:
//   - a ConfigMap of plain values;
//   - a Secret of the revision's secrets — its values are never in the desired state: the agent
//     fetches them from ctrl (GetSecretValues) only when it creates the Secret; it can neither
//     read nor list Secrets (RBAC), so it creates it once per process (409: already there) and
//     deletes it by name;
//   - a Secrets Store CSI SecretProviderClass for external references (provider and parameters
//     are this cluster's: the agent's --secret-store-* settings), mounted read-only into the
//     pods; the driver syncs a Secret of the same name that the pods read as environment. That
//     Secret is required: a pod whose store did not give every key does not start (the kubelet
//     waits for the Secret), and the driver's event saying why is reported (events.ts).
// Pods get them with envFrom (explicit env vars — the user's, PORT, KRANE_* — win).
import type {
  ApplyDeployment,
  ExternalSecrets,
  RevisionConfig,
  RevisionSecrets,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";

/** Where external secrets are mounted in the pods (one file per key). */
export const EXTERNAL_SECRETS_MOUNT = "/var/run/secrets/krane/external";
export const EXTERNAL_SECRETS_VOLUME = "krane-external-secrets";
export const CSI_DRIVER = "secrets-store.csi.k8s.io";

/** The cluster's external secret store (the agent's settings). */
export interface SecretStoreSettings {
  readonly provider: string;
  readonly parameters: Readonly<Record<string, string>>;
}

export interface SettingsCarrier {
  readonly config?: RevisionConfig;
  readonly secrets?: RevisionSecrets;
  readonly externalSecrets?: ExternalSecrets;
}

export interface SettingsPodParts {
  envFrom: Record<string, unknown>[];
  volumes: Record<string, unknown>[];
  volumeMounts: Record<string, unknown>[];
}

export function settingsPodParts(d: SettingsCarrier): SettingsPodParts {
  const out: SettingsPodParts = { envFrom: [], volumes: [], volumeMounts: [] };
  if (d.config && d.config.values.length > 0) out.envFrom.push({ configMapRef: { name: d.config.configMapName } });
  if (d.secrets && d.secrets.keys.length > 0) out.envFrom.push({ secretRef: { name: d.secrets.secretName } });
  const ext = d.externalSecrets;
  if (ext && ext.secrets.length > 0) {
    // The driver creates the synced Secret once a pod mounts the volume. Required, so a pod never
    // starts without its external secrets: until the Secret is there (the store gave every key)
    // the kubelet holds the container back and retries.
    out.envFrom.push({ secretRef: { name: ext.secretProviderClassName } });
    out.volumes.push({
      name: EXTERNAL_SECRETS_VOLUME,
      csi: {
        driver: CSI_DRIVER,
        readOnly: true,
        volumeAttributes: { secretProviderClass: ext.secretProviderClassName },
      },
    });
    out.volumeMounts.push({ name: EXTERNAL_SECRETS_VOLUME, mountPath: EXTERNAL_SECRETS_MOUNT, readOnly: true });
  }
  return out;
}

export function renderConfigMap(c: RevisionConfig, namespace: string, labels: Record<string, string>): KubeObject {
  const data: Record<string, string> = {};
  for (const v of c.values) data[v.name] = v.value;
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: c.configMapName, namespace, labels },
    immutable: true,
    data,
  };
}

/** The revision's Secret with its values (fetched from ctrl, never cached or logged). */
export function renderSecret(
  s: RevisionSecrets,
  namespace: string,
  labels: Record<string, string>,
  values: readonly { key: string; value: Uint8Array }[],
): KubeObject {
  const data: Record<string, string> = {};
  for (const v of values) data[v.key] = Buffer.from(v.value).toString("base64");
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: { name: s.secretName, namespace, labels },
    immutable: true,
    data,
  };
}

/** The provider's object list: one entry per key, the path as the object name. */
function providerObjects(ext: ExternalSecrets): string {
  return ext.secrets
    .map(
      (s) =>
        `- objectName: ${JSON.stringify(s.key)}\n  objectPath: ${JSON.stringify(s.path)}\n  secretPath: ${JSON.stringify(s.path)}`,
    )
    .join("\n");
}

export function renderSecretProviderClass(
  ext: ExternalSecrets,
  store: SecretStoreSettings,
  namespace: string,
  labels: Record<string, string>,
): KubeObject {
  return {
    apiVersion: "secrets-store.csi.x-k8s.io/v1",
    kind: "SecretProviderClass",
    metadata: { name: ext.secretProviderClassName, namespace, labels },
    spec: {
      provider: store.provider,
      parameters: { ...store.parameters, objects: providerObjects(ext) },
      secretObjects: [
        {
          secretName: ext.secretProviderClassName,
          type: "Opaque",
          labels,
          data: ext.secrets.map((s) => ({ objectName: s.key, key: s.key })),
        },
      ],
    },
  };
}

/** The names of a revision's settings objects (what the revision's deletion removes by name). */
export function settingsObjectNames(d: Pick<ApplyDeployment, "config" | "secrets" | "externalSecrets">): {
  configMap?: string;
  secret?: string;
  spc?: string;
} {
  return {
    configMap: d.config && d.config.values.length > 0 ? d.config.configMapName : undefined,
    secret: d.secrets && d.secrets.keys.length > 0 ? d.secrets.secretName : undefined,
    spc:
      d.externalSecrets && d.externalSecrets.secrets.length > 0 ? d.externalSecrets.secretProviderClassName : undefined,
  };
}

/**
 * The Secret a ReplicaSet's pods read (its revision's), from its pod template: the one its
 * containers take as environment that the external secrets' driver does not write (the synced
 * Secret is named after the SecretProviderClass its CSI volume mounts).
 */
export function secretNameOfReplicaSet(rs: KubeObject): string {
  const spec = rs.spec as
    | {
        template?: {
          spec?: {
            containers?: { envFrom?: { secretRef?: { name?: string; optional?: boolean } }[] }[];
            volumes?: { csi?: { driver?: string; volumeAttributes?: { secretProviderClass?: string } } }[];
          };
        };
      }
    | undefined;
  const pod = spec?.template?.spec;
  const synced = new Set(
    (pod?.volumes ?? []).flatMap((v) =>
      v.csi?.driver === CSI_DRIVER && v.csi.volumeAttributes?.secretProviderClass
        ? [v.csi.volumeAttributes.secretProviderClass]
        : [],
    ),
  );
  for (const c of pod?.containers ?? []) {
    for (const e of c.envFrom ?? [])
      if (e.secretRef?.name && !e.secretRef.optional && !synced.has(e.secretRef.name)) return e.secretRef.name;
  }
  return "";
}
