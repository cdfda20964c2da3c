// The dashboard's clients of ctrl's public API: Connect over fetch, generated from the same
// protos as the CLI's (src/gen). Same origin, so the browser sends the HttpOnly session cookie;
// the page never sees a token.
import { createClient, ConnectError, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import type { DescService } from "@bufbuild/protobuf";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../gen/krane/ctrl/v1/rollout_pb.js";
import { LiveService, MetricsService } from "../gen/krane/ctrl/v1/live_pb.js";
import { ConfigService } from "../gen/krane/ctrl/v1/config_pb.js";
import { InstanceEventService } from "../gen/krane/ctrl/v1/events_pb.js";
import { LogService } from "../gen/krane/ctrl/v1/logs_pb.js";
import { AuditService } from "../gen/krane/ctrl/v1/audit_pb.js";

// Binary: smaller than JSON, and a live view's bytes are encoded once by ctrl for every stream.
const transport = createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true });

function client<S extends DescService>(s: S): Client<S> {
  return createClient(s, transport);
}

export const api = {
  workspaces: client(WorkspaceService),
  projects: client(ProjectService),
  environments: client(EnvironmentService),
  deployments: client(DeploymentService),
  regions: client(RegionService),
  status: client(StatusService),
  rollout: client(RolloutService),
  live: client(LiveService),
  metrics: client(MetricsService),
  config: client(ConfigService),
  events: client(InstanceEventService),
  logs: client(LogService),
  audit: client(AuditService),
};

/** ctrl's own message for a refused call. */
export function errorText(err: unknown): string {
  return ConnectError.from(err).rawMessage;
}

export function isSignedOut(err: unknown): boolean {
  return ConnectError.from(err).code === 16;
}

/** Refusals no retry mends (not found, not allowed, bad request): a stream stops on them. */
export function isFinal(err: unknown): boolean {
  const code = ConnectError.from(err).code;
  return code === 3 || code === 5 || code === 7 || code === 9;
}

export interface Me {
  name: string;
}

export async function whoAmI(): Promise<Me | undefined> {
  const res = await fetch("/dashboard/session", { credentials: "same-origin" });
  return res.ok ? ((await res.json()) as Me) : undefined;
}

/** Signs in: the token goes in this POST's body only, and is not kept. */
export async function signIn(token: string): Promise<string | undefined> {
  const res = await fetch("/dashboard/session", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token }),
  });
  if (res.ok) return undefined;
  const body = (await res.json().catch(() => ({}))) as { message?: string };
  return body.message ?? `sign-in failed (${res.status})`;
}

export async function signOut(): Promise<void> {
  await fetch("/dashboard/session", { method: "DELETE", credentials: "same-origin" });
}
