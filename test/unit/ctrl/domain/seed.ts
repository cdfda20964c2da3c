// What the domain tests start from: region "eu", workspace "acme", project "shop" and its
// environment "prod" (defaults for everything else), and a signed webhook channel of the workspace.
import { create } from "@bufbuild/protobuf";
import type { NotificationEventType } from "../../../../src/contracts/notifications.js";
import type { Store } from "../../../../src/ctrl/db/store.js";
import { createRegion } from "../../../../src/ctrl/domain/clusters.js";
import { createEnvironment } from "../../../../src/ctrl/domain/environments.js";
import { addChannel } from "../../../../src/ctrl/domain/notifications.js";
import { createProject, createWorkspace } from "../../../../src/ctrl/domain/tenancy.js";
import { Keyring } from "../../../../src/ctrl/secrets/keyring.js";
import { validateCreateEnvironment } from "../../../../src/ctrl/validate/api.js";
import { CreateEnvironmentRequestSchema } from "../../../../src/gen/krane/ctrl/v1/api_pb.js";

export const REF = { workspace: "acme", project: "shop", environment: "prod" } as const;

/** Seeds the tenancy and a channel getting `events`; answers the ids. */
export async function seedEnvironment(
  store: Store,
  events: NotificationEventType[],
): Promise<{ workspaceId: string; projectId: string; environmentId: string }> {
  await createRegion(store, "eu");
  const ws = await createWorkspace(store, { slug: "acme", name: "Acme" });
  const project = await createProject(store, { workspace: "acme", slug: "shop", name: "Shop" });
  const { environment } = await createEnvironment(
    store,
    validateCreateEnvironment(
      create(CreateEnvironmentRequestSchema, { ...REF, slug: "prod", regions: [{ region: "eu", replicas: 1 }] }),
    ),
  );
  await addChannel(store, new Keyring(Buffer.alloc(32, 9)), {
    workspace: "acme",
    name: "oncall",
    target: { type: "webhook", url: "https://hooks.example.com/x", secret: "domain-test-key-0123456789" },
    events,
    environments: [],
  });
  return { workspaceId: ws.id, projectId: project.id, environmentId: environment.id };
}
