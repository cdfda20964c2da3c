// Child process of bench/audit/audit.ts: ctrl with its audit log recording or not (argv: database URL,
// "on" | "off" | "serve"), in a process of its own so the writers (in the parent) do not share its
// event loop. "on" and "off" seed a workspace, project, region and environment; "serve" records
// and seeds nothing (a database the parent filled). Then it prints one JSON line {url, token}
// and serves until SIGTERM.
import { generateToken, addUserToken } from "../../src/ctrl/domain/tokens.js";
import { startCtrl } from "../../src/ctrl/server/server.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";

const [databaseUrl = "", mode = "on"] = process.argv.slice(2);
const ctrl = await startCtrl({
  databaseUrl,
  listen: { host: "127.0.0.1", port: 0 },
  opsListen: null,
  shutdownGraceMs: 1000,
  audit: { record: mode !== "off" },
});
const token = generateToken("user");
await addUserToken(ctrl.store, "bench", token);
const t = createConnectTransport({
  baseUrl: ctrl.url,
  httpVersion: "2",
  interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
});
if (mode !== "serve") {
  await createClient(RegionService, t).createRegion({ name: "bench" });
  await createClient(WorkspaceService, t).createWorkspace({ slug: "acme" });
  await createClient(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
  await createClient(EnvironmentService, t).createEnvironment({
    workspace: "acme",
    project: "shop",
    slug: "prod",
    regions: [{ region: "bench", replicas: 1 }],
    rollout: { revisionHistoryLimit: 5 },
  });
}
process.stdout.write(`${JSON.stringify({ url: ctrl.url, token })}\n`);
process.on("SIGTERM", () => void ctrl.close().then(() => process.exit(0)));
