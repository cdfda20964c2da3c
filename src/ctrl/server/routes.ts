// Every service ctrl serves, with its handlers and their dependencies: the public API, the
// agents' ClusterService and LogChannelService. Every service answers repeats under an
// Idempotency-Key from the recorded answer (./idempotency.ts); repeats whose first answer was lost
// are answered from state where a method can be (./reanswers.ts).
import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import type { AllowedKind } from "../../contracts/releases.js";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  RegistryService,
  StatusService,
  WorkspaceService,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import { ProjectFileService } from "../../gen/krane/ctrl/v1/apply_pb.js";
import { AuditService } from "../../gen/krane/ctrl/v1/audit_pb.js";
import { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { ConfigService } from "../../gen/krane/ctrl/v1/config_pb.js";
import { InstanceEventService } from "../../gen/krane/ctrl/v1/events_pb.js";
import { DomainService, EndpointService, PolicyService } from "../../gen/krane/ctrl/v1/exposure_pb.js";
import { JobService } from "../../gen/krane/ctrl/v1/job_pb.js";
import { LiveService, MetricsService } from "../../gen/krane/ctrl/v1/live_pb.js";
import { LogChannelService, LogService } from "../../gen/krane/ctrl/v1/logs_pb.js";
import { NotificationService } from "../../gen/krane/ctrl/v1/notify_pb.js";
import { AlertService } from "../../gen/krane/ctrl/v1/alerts_pb.js";
import { ApiKeyService } from "../../gen/krane/ctrl/v1/keys_pb.js";
import { QuotaService } from "../../gen/krane/ctrl/v1/quota_pb.js";
import { PreviewService } from "../../gen/krane/ctrl/v1/preview_pb.js";
import { ReleaseService } from "../../gen/krane/ctrl/v1/release_pb.js";
import { RolloutService } from "../../gen/krane/ctrl/v1/rollout_pb.js";
import { auditServiceImpl } from "../api/audit.js";
import { configServiceImpl, jobServiceImpl, releaseServiceImpl } from "../api/environment-objects.js";
import { domainServiceImpl, endpointServiceImpl } from "../api/exposure.js";
import { policyServiceImpl } from "../api/edge-policies.js";
import {
  apiTokenServiceImpl,
  deploymentServiceImpl,
  environmentServiceImpl,
  projectServiceImpl,
  regionServiceImpl,
  statusServiceImpl,
  workspaceServiceImpl,
} from "../api/handlers.js";
import { instanceEventServiceImpl } from "../api/instance-events.js";
import { quotaServiceImpl } from "../api/quotas.js";
import { registryServiceImpl } from "../api/registries.js";
import { notificationServiceImpl } from "../api/notifications.js";
import { alertServiceImpl } from "../api/alerts.js";
import { apiKeyServiceImpl } from "../api/api-keys.js";
import { previewServiceImpl } from "../api/previews.js";
import { projectFileServiceImpl } from "../api/project-file.js";
import { memberServiceImpl, sessionServiceImpl } from "../api/access.js";
import { MemberService, SessionService } from "../../gen/krane/ctrl/v1/access_pb.js";
import { rolloutServiceImpl } from "../api/rollout.js";
import type { Authenticator } from "../auth/authenticator.js";
import type { BuildWorker } from "../builds/worker.js";
import { buildServiceImpl, DEFAULT_MAX_SOURCE_BYTES } from "../api/builds.js";
import { BuildService } from "../../gen/krane/ctrl/v1/build_pb.js";
import { RepositoryService } from "../../gen/krane/ctrl/v1/repository_pb.js";
import { repositoryServiceImpl } from "../api/repositories.js";
import { clusterServiceImpl } from "../cluster-service/handlers.js";
import type { Store } from "../db/store.js";
import { finishDeletions } from "../domain/deletion.js";
import type { ExposureSettings } from "../domain/exposure.js";
import type { DomainVerifier } from "../exposure/verifier.js";
import type { ImageResolver } from "../images/resolve.js";
import type { LiveHub } from "../live/hub.js";
import { liveServiceImpl, metricsServiceImpl, type LiveServiceOptions } from "../live/service.js";
import type { LogHub } from "../logs/hub.js";
import type { NotificationDeliverer } from "../notifications/deliverer.js";
import { logChannelServiceImpl, logServiceImpl, type LogServiceOptions } from "../logs/service.js";
import type { RolloutDriver } from "../rollout/driver.js";
import type { Keyring } from "../secrets/keyring.js";
import type { FeedHub } from "../stream/feed.js";
import { replayable, type Reanswers } from "./idempotency.js";
import type { CtrlMetrics } from "./metrics.js";
import {
  deploymentReanswers,
  environmentReanswers,
  projectReanswers,
  rolloutReanswers,
  workspaceReanswers,
} from "./reanswers.js";

export interface RouteDeps {
  readonly store: Store;
  readonly hub: FeedHub;
  readonly logHub: LogHub;
  readonly liveHub: LiveHub;
  readonly metrics: CtrlMetrics;
  readonly rollout: RolloutDriver;
  readonly domains: DomainVerifier;
  readonly auth: Authenticator;
  readonly exposure: ExposureSettings;
  readonly keyring: Keyring | undefined;
  readonly releaseKinds: readonly AllowedKind[] | undefined;
  /** Ends watch and log streams cleanly when ctrl stops. */
  readonly streamsStop: AbortSignal;
  readonly streamKeepaliveMs: number | undefined;
  readonly logs: LogServiceOptions | undefined;
  readonly live: LiveServiceOptions | undefined;
  /** A preview's commit status may be due now. */
  readonly statusDue: () => void;
  /** Pins deploys' images to digests (absent: images run as named). */
  readonly images: ImageResolver | undefined;
  /** Background work that failed (outages are logged once). */
  readonly backgroundFailure: (what: string) => (err: unknown) => void;
  /** Notifications: test messages go out through the deliverer; loopback receivers when allowed. */
  /** Builds from source (absent: this ctrl does not build). */
  readonly builds: BuildWorker | undefined;
  readonly notifications: {
    deliverer: NotificationDeliverer;
    allowLoopback: boolean;
    smtpCheckTimeoutMs?: number;
  };
}

export function apiRoutes(d: RouteDeps): (connectRouter: ConnectRouter) => void {
  return (connectRouter) => {
    const router = {
      service: <S extends DescService>(s: S, impl: Partial<ServiceImpl<S>>, again?: Reanswers<S>) =>
        connectRouter.service(s, replayable<S, Partial<ServiceImpl<S>>>(impl, again)),
    };
    const { store, rollout } = d;
    const deps = { store, rollout, auth: d.auth, exposure: d.exposure, images: d.images, keyring: d.keyring };
    router.service(
      ClusterService,
      clusterServiceImpl({
        store,
        hub: d.hub,
        metrics: d.metrics,
        streamsStop: d.streamsStop,
        streamKeepaliveMs: d.streamKeepaliveMs,
        onReport: (kind, region, subject) => rollout.reported(kind, region, subject),
        onRegionScaled: (environmentId) =>
          void rollout
            .environmentChanged(environmentId)
            .catch(d.backgroundFailure("a rollout pass after autoscaling failed")),
        keyring: d.keyring,
        ...(d.builds ? { builds: d.builds } : {}),
        onDeletionConfirmed: (environmentId) =>
          void finishDeletions(store, environmentId).catch(d.backgroundFailure("finishing a deletion failed")),
      }),
    );
    const workspaces = workspaceServiceImpl(deps);
    router.service(WorkspaceService, workspaces, workspaceReanswers(workspaces));
    const projects = projectServiceImpl(deps);
    router.service(ProjectService, projects, projectReanswers(projects));
    const environments = environmentServiceImpl(deps);
    router.service(EnvironmentService, environments, environmentReanswers(environments));
    const deployments = deploymentServiceImpl(deps);
    router.service(DeploymentService, deployments, deploymentReanswers(deployments));
    router.service(RegionService, regionServiceImpl(deps));
    router.service(StatusService, statusServiceImpl(deps));
    router.service(ApiTokenService, apiTokenServiceImpl(deps));
    router.service(
      RegistryService,
      registryServiceImpl({ store, keyring: d.keyring, managedHost: d.builds?.tokenRegistry }),
    );
    router.service(QuotaService, quotaServiceImpl({ store }));
    router.service(MemberService, memberServiceImpl(deps));
    router.service(SessionService, sessionServiceImpl(deps));
    const rollouts = rolloutServiceImpl({ store, driver: rollout });
    router.service(RolloutService, rollouts, rolloutReanswers(rollouts));
    const objects = { store, rollout, keyring: d.keyring, releaseKinds: d.releaseKinds };
    router.service(ConfigService, configServiceImpl(objects));
    router.service(ReleaseService, releaseServiceImpl(objects));
    router.service(JobService, jobServiceImpl(objects));
    const exposureDeps = {
      store,
      settings: d.exposure,
      policy: d.domains.policy,
      verifyNow: (id: string) => d.domains.verifyNow(id),
    };
    router.service(EndpointService, endpointServiceImpl(exposureDeps));
    router.service(PolicyService, policyServiceImpl({ store }));
    router.service(DomainService, domainServiceImpl(exposureDeps));
    router.service(ProjectFileService, projectFileServiceImpl({ ...exposureDeps, rollout }));
    router.service(AuditService, auditServiceImpl({ store }));
    router.service(InstanceEventService, instanceEventServiceImpl({ store }));
    const logDeps = { ...d.logs, store, hub: d.logHub, keyring: d.keyring, stop: d.streamsStop };
    router.service(LogService, logServiceImpl(logDeps));
    router.service(
      LiveService,
      liveServiceImpl({
        ...d.live,
        store,
        hub: d.liveHub,
        stop: d.streamsStop,
        stillValid: (header) => d.auth.stillValid(header),
      }),
    );
    router.service(MetricsService, metricsServiceImpl({ store }));
    router.service(LogChannelService, logChannelServiceImpl(logDeps));
    router.service(
      PreviewService,
      previewServiceImpl({
        store,
        keyring: d.keyring,
        exposure: d.exposure,
        rollout,
        statusDue: d.statusDue,
        images: d.images,
      }),
    );
    router.service(NotificationService, notificationServiceImpl({ store, keyring: d.keyring, ...d.notifications }));
    router.service(AlertService, alertServiceImpl({ store }));
    router.service(ApiKeyService, apiKeyServiceImpl({ store }));
    const worker = d.builds;
    router.service(
      BuildService,
      buildServiceImpl({
        store,
        worker: worker && {
          queued: () => worker.queued(),
          maxSourceBytes: worker.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES,
        },
      }),
    );
    router.service(RepositoryService, repositoryServiceImpl({ store, keyring: d.keyring }));
  };
}
