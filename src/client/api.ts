// A client of ctrl's public API (what the CLI, `krane dev` and scripts use): one Connect
// transport over HTTP/2 with the caller's bearer token, and a client per service.
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../gen/krane/ctrl/v1/rollout_pb.js";
import { EndpointService } from "../gen/krane/ctrl/v1/exposure_pb.js";

export interface ApiClients {
  workspaces: Client<typeof WorkspaceService>;
  projects: Client<typeof ProjectService>;
  environments: Client<typeof EnvironmentService>;
  deployments: Client<typeof DeploymentService>;
  regions: Client<typeof RegionService>;
  status: Client<typeof StatusService>;
  rollouts: Client<typeof RolloutService>;
  endpoints: Client<typeof EndpointService>;
}

export function createApiClients(baseUrl: string, token: string, timeoutMs = 15_000): ApiClients {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl,
    httpVersion: "2",
    interceptors: [bearer],
    defaultTimeoutMs: timeoutMs,
  });
  return {
    workspaces: createClient(WorkspaceService, transport),
    projects: createClient(ProjectService, transport),
    environments: createClient(EnvironmentService, transport),
    deployments: createClient(DeploymentService, transport),
    regions: createClient(RegionService, transport),
    status: createClient(StatusService, transport),
    rollouts: createClient(RolloutService, transport),
    endpoints: createClient(EndpointService, transport),
  };
}
