// The public API of an environment's objects: ConfigService (configuration and secrets — a
// change makes a new revision, which the rollout driver then rolls out), ReleaseService
// (releases of arbitrary allow-listed objects) and JobService (cron jobs). Each handler
// validates (→ InvalidArgument naming the field; a secret's value is never echoed), calls the
// domain, reads its answer from ../read, and converts.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ConfigChangeSchema,
  ConfigEntrySchema,
  ConfigService,
  SecretEntrySchema,
} from "../../gen/krane/ctrl/v1/config_pb.js";
import {
  JobRegionStatusSchema,
  JobSchema,
  JobService,
  JobSpecSchema,
  type Job,
} from "../../gen/krane/ctrl/v1/job_pb.js";
import {
  JobRunSchema,
  ObjectHealth,
  ReleaseKindSchema,
  ReleaseObjectStatusSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import {
  ReleaseObjectSummarySchema,
  ReleaseRegionStatusSchema,
  ReleaseSchema,
  ReleaseService,
  type Release,
} from "../../gen/krane/ctrl/v1/release_pb.js";
import { DEFAULT_RELEASE_KINDS, type AllowedKind } from "../../contracts/releases.js";
import type { Store } from "../db/store.js";
import { deleteJob, putJob, type ReportedRun } from "../domain/jobs.js";
import { applyRelease, deleteRelease, type ObjectHealthName, type ReportedObject } from "../domain/releases.js";
import { setConfig, setSecrets, unsetConfig, unsetSecrets, type SettingsChange } from "../domain/settings.js";
import { failedPrecondition } from "../errors.js";
import { desiredReplicasByRegion } from "../read/deployments.js";
import {
  getRelease,
  jobView,
  listConfig,
  listJobs,
  listReleases,
  listSecrets,
  type JobView,
  type ReleaseView,
} from "../read/environment-objects.js";
import { findEnvironment } from "../read/tenancy.js";
import type { StoredJobSpec } from "../validate/types.js";
import type { Keyring } from "../secrets/keyring.js";
import { validateEnvironmentRef } from "../validate/api.js";
import { validateJobSpec } from "../validate/job.js";
import { validateReleaseFiles } from "../validate/release.js";
import * as rules from "../validate/rules.js";
import { settingKeys, validateConfigValues, validateSecretInputs } from "../validate/settings.js";
import { deploymentMsg } from "./convert.js";

export interface EnvironmentObjectsDeps {
  store: Store;
  /** Runs rollout passes after a new revision (absent in store-only tests). */
  rollout?: { environmentChanged(environmentId: string): Promise<void> };
  /** Seals secrets; without it secrets are refused. */
  keyring?: Keyring;
  /** The platform's allow-list of release kinds (default DEFAULT_RELEASE_KINDS). */
  releaseKinds?: readonly AllowedKind[];
}

export function configServiceImpl({
  store,
  rollout,
  keyring,
}: EnvironmentObjectsDeps): ServiceImpl<typeof ConfigService> {
  const changeMsg = async (c: SettingsChange) => {
    if (c.changed) await rollout?.environmentChanged(c.environmentId);
    return create(ConfigChangeSchema, {
      changed: c.changed,
      deployment: c.revision
        ? deploymentMsg(c.revision, await desiredReplicasByRegion(store.db, c.revision.deployment.id))
        : undefined,
    });
  };
  const needKeyring = (): Keyring => {
    if (!keyring) throw failedPrecondition("this ctrl has no master key for secrets (--master-key-file)");
    return keyring;
  };
  return {
    async setConfig(req) {
      const ref = validateEnvironmentRef(req);
      return { change: await changeMsg(await setConfig(store, ref, validateConfigValues(req.values))) };
    },
    async unsetConfig(req) {
      const ref = validateEnvironmentRef(req);
      return { change: await changeMsg(await unsetConfig(store, ref, settingKeys("keys", req.keys))) };
    },
    async listConfig(req) {
      const rows = await listConfig(store.db, validateEnvironmentRef(req));
      return {
        entries: rows.map((r) =>
          create(ConfigEntrySchema, { key: r.key, value: r.value, updatedAtUnixMs: BigInt(r.updated_at) }),
        ),
      };
    },
    async setSecrets(req) {
      const ref = validateEnvironmentRef(req);
      const input = validateSecretInputs(req.secrets);
      return { change: await changeMsg(await setSecrets(store, needKeyring(), ref, input)) };
    },
    async unsetSecrets(req) {
      const ref = validateEnvironmentRef(req);
      return { change: await changeMsg(await unsetSecrets(store, ref, settingKeys("keys", req.keys))) };
    },
    async listSecrets(req) {
      const rows = await listSecrets(store.db, validateEnvironmentRef(req));
      return {
        entries: rows.map((r) =>
          create(SecretEntrySchema, {
            key: r.key,
            source: r.source,
            externalPath: r.externalPath,
            updatedAtUnixMs: BigInt(r.updatedAt),
          }),
        ),
      };
    },
  };
}

const HEALTH: Record<ObjectHealthName, ObjectHealth> = {
  unknown: ObjectHealth.UNSPECIFIED,
  progressing: ObjectHealth.PROGRESSING,
  healthy: ObjectHealth.HEALTHY,
  degraded: ObjectHealth.DEGRADED,
  suspended: ObjectHealth.SUSPENDED,
  "kind-missing": ObjectHealth.KIND_MISSING,
  refused: ObjectHealth.REFUSED,
};

export function releaseMsg(v: ReleaseView): Release {
  return create(ReleaseSchema, {
    id: v.release.id,
    environmentId: v.release.environment_id,
    name: v.release.name,
    version: BigInt(v.release.version),
    createdAtUnixMs: BigInt(v.release.created_at),
    updatedAtUnixMs: BigInt(v.release.updated_at),
    objects: v.objects.map((o) =>
      create(ReleaseObjectSummarySchema, {
        id: o.id,
        name: o.name,
        kind: create(ReleaseKindSchema, { group: o.group, version: o.version, kind: o.kind }),
      }),
    ),
    regions: v.status.map((s) =>
      create(ReleaseRegionStatusSchema, {
        region: s.region,
        observedVersion: BigInt(s.observedVersion),
        rejectedReason: s.rejectedReason ?? "",
        reportedAtUnixMs: BigInt(s.reportedAt),
        objects: (s.objects as ReportedObject[]).map((o) =>
          create(ReleaseObjectStatusSchema, {
            id: o.id,
            kind: create(ReleaseKindSchema, { group: o.group, version: o.version, kind: o.kind }),
            namespace: o.namespace,
            name: o.name,
            health: HEALTH[o.health] ?? ObjectHealth.UNSPECIFIED,
            message: o.message,
          }),
        ),
      }),
    ),
  });
}

function releaseName(field: string, v: string): string {
  return v === "" ? "default" : rules.slug(field, v);
}

export function releaseServiceImpl({
  store,
  keyring,
  releaseKinds,
}: EnvironmentObjectsDeps): ServiceImpl<typeof ReleaseService> {
  return {
    async applyRelease(req) {
      const ref = validateEnvironmentRef(req);
      const name = releaseName("name", req.name);
      const env = await findEnvironment(store.db, ref);
      const objects = validateReleaseFiles(
        req.files,
        env.workspace.k8s_namespace,
        releaseKinds ?? DEFAULT_RELEASE_KINDS,
      );
      const secrets = objects.some((o) => o.group === "" && o.kind === "Secret");
      if (secrets && !keyring)
        throw failedPrecondition(
          "this ctrl has no master key for secrets (--master-key-file): a release with a Secret cannot be stored",
        );
      const { changed } = await applyRelease(store, keyring as Keyring, ref, name, objects);
      return { release: releaseMsg(await getRelease(store.db, ref, name)), changed };
    },
    async getRelease(req) {
      return {
        release: releaseMsg(await getRelease(store.db, validateEnvironmentRef(req), releaseName("name", req.name))),
      };
    },
    async listReleases(req) {
      return { releases: (await listReleases(store.db, validateEnvironmentRef(req))).map(releaseMsg) };
    },
    async deleteRelease(req) {
      await deleteRelease(store, validateEnvironmentRef(req), releaseName("name", req.name));
      return {};
    },
  };
}

const RESULT = { running: 1, succeeded: 2, failed: 3, unknown: 0 } as const;

export function jobMsg(v: JobView): Job {
  const s = JSON.parse(v.job.spec) as StoredJobSpec;
  return create(JobSchema, {
    id: v.job.id,
    environmentId: v.job.environment_id,
    createdAtUnixMs: BigInt(v.job.created_at),
    updatedAtUnixMs: BigInt(v.job.updated_at),
    spec: create(JobSpecSchema, {
      ...s,
      deadlineSeconds: BigInt(s.deadlineSeconds),
      cpuMillicores: BigInt(s.cpuMillicores),
      memoryMib: BigInt(s.memoryMib),
    }),
    regions: v.status.map((st) =>
      create(JobRegionStatusSchema, {
        region: st.region,
        lastScheduleUnixMs: BigInt(st.lastSchedule),
        rejectedReason: st.rejectedReason ?? "",
        reportedAtUnixMs: BigInt(st.reportedAt),
        runs: (st.runs as ReportedRun[]).map((r) =>
          create(JobRunSchema, {
            k8sName: r.k8sName,
            startedUnixMs: BigInt(r.startedAt),
            finishedUnixMs: BigInt(r.finishedAt),
            result: RESULT[r.result] ?? 0,
          }),
        ),
      }),
    ),
  });
}

export function jobServiceImpl({ store }: EnvironmentObjectsDeps): ServiceImpl<typeof JobService> {
  return {
    async putJob(req) {
      const ref = validateEnvironmentRef(req);
      const id = await putJob(store, ref, validateJobSpec(req.spec));
      return { job: jobMsg(await jobView(store.db, ref, id)) };
    },
    async listJobs(req) {
      return { jobs: (await listJobs(store.db, validateEnvironmentRef(req))).map(jobMsg) };
    },
    async deleteJob(req) {
      await deleteJob(store, validateEnvironmentRef(req), rules.slug("name", req.name));
      return {};
    },
  };
}
