// The one list of ctrl's public services and a typed client of each, over any Connect transport:
// the CLI and `krane dev` pass Node's HTTP/2 transport (./node.ts), the dashboard the browser's
// (src/dashboard/api.ts). A new public service is one line here.
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  RegistryService,
  StatusService,
  WorkspaceService,
} from "../gen/krane/ctrl/v1/api_pb.js";
import { ProjectFileService } from "../gen/krane/ctrl/v1/apply_pb.js";
import { MemberService, SessionService } from "../gen/krane/ctrl/v1/access_pb.js";
import { AuditService } from "../gen/krane/ctrl/v1/audit_pb.js";
import { BuildService } from "../gen/krane/ctrl/v1/build_pb.js";
import { RepositoryService } from "../gen/krane/ctrl/v1/repository_pb.js";
import { ConfigService } from "../gen/krane/ctrl/v1/config_pb.js";
import { InstanceEventService } from "../gen/krane/ctrl/v1/events_pb.js";
import { DomainService, EndpointService, PolicyService } from "../gen/krane/ctrl/v1/exposure_pb.js";
import { JobService } from "../gen/krane/ctrl/v1/job_pb.js";
import { LiveService, MetricsService } from "../gen/krane/ctrl/v1/live_pb.js";
import { LogService } from "../gen/krane/ctrl/v1/logs_pb.js";
import { NotificationService } from "../gen/krane/ctrl/v1/notify_pb.js";
import { AlertService } from "../gen/krane/ctrl/v1/alerts_pb.js";
import { ApiKeyService } from "../gen/krane/ctrl/v1/keys_pb.js";
import { PreviewService } from "../gen/krane/ctrl/v1/preview_pb.js";
import { QuotaService } from "../gen/krane/ctrl/v1/quota_pb.js";
import { ReleaseService } from "../gen/krane/ctrl/v1/release_pb.js";
import { RolloutService } from "../gen/krane/ctrl/v1/rollout_pb.js";

export const API_SERVICES = {
  workspaces: WorkspaceService,
  projects: ProjectService,
  environments: EnvironmentService,
  deployments: DeploymentService,
  regions: RegionService,
  status: StatusService,
  tokens: ApiTokenService,
  registries: RegistryService,
  members: MemberService,
  sessions: SessionService,
  rollouts: RolloutService,
  config: ConfigService,
  releases: ReleaseService,
  jobs: JobService,
  endpoints: EndpointService,
  domains: DomainService,
  policies: PolicyService,
  events: InstanceEventService,
  logs: LogService,
  live: LiveService,
  metrics: MetricsService,
  audit: AuditService,
  previews: PreviewService,
  projectFiles: ProjectFileService,
  notifications: NotificationService,
  alerts: AlertService,
  apiKeys: ApiKeyService,
  quotas: QuotaService,
  builds: BuildService,
  repositories: RepositoryService,
} as const;

export type ApiClients = { readonly [K in keyof typeof API_SERVICES]: Client<(typeof API_SERVICES)[K]> };

/** A client of every public service over `transport`. */
export function apiClients(transport: Transport): ApiClients {
  return Object.fromEntries(
    Object.entries(API_SERVICES).map(([name, service]) => [name, createClient(service, transport)]),
  ) as unknown as ApiClients;
}
