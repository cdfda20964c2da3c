// Child process of bench/audit/audit.ts: ctrl with its audit log recording or not (argv: database URL,
// "on" | "off" | "serve"), in a process of its own so the writers (in the parent) do not share its
// event loop. "on" and "off" seed a workspace, project, region and environment; "serve" records
// and seeds nothing (a database the parent filled). Then it prints one JSON line {url, token}
// and serves until SIGTERM.
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { startTestCtrl } from "../../test/integration/ctrl/support.js";

const [databaseUrl = "", mode = "on"] = process.argv.slice(2);
const ctrl = await startTestCtrl(databaseUrl, {
  opsListen: null,
  shutdownGraceMs: 1000,
  audit: { record: mode !== "off" },
});
const token = ctrl.adminToken;
if (mode !== "serve") {
  await ctrl.client(RegionService, token).createRegion({ name: "bench" });
  await ctrl.client(WorkspaceService, token).createWorkspace({ slug: "acme" });
  await ctrl.client(ProjectService, token).createProject({ workspace: "acme", slug: "shop" });
  await ctrl.client(EnvironmentService, token).createEnvironment({
    workspace: "acme",
    project: "shop",
    slug: "prod",
    regions: [{ region: "bench", replicas: 1 }],
    rollout: { revisionHistoryLimit: 5 },
  });
}
process.stdout.write(`${JSON.stringify({ url: ctrl.url, token })}\n`);
process.on("SIGTERM", () => void ctrl.close().then(() => process.exit(0)));
