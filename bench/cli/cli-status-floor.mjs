// The floor of `krane status` on Node.js, for bench/cli/cli.ts: a plain script that makes the same
// four calls (the only workspace, then the environment's status, rollout and last instance
// events at once) over node:http2 in the Connect protocol's JSON, and prints the answers' sizes.
// No command line, no retries, no rendering: what any Node.js client of ctrl pays at the least.
//
//   KRANE_CTRL_URL=… KRANE_TOKEN=… node bench/cli/cli-status-floor.mjs <project>/<env>
/* global process */
import { connect } from "node:http2";

const session = connect(process.env.KRANE_CTRL_URL ?? "http://127.0.0.1:7070");
/** @param {string} path @param {object} body @returns {Promise<{ workspaces: { slug: string }[] }>} */
const call = (path, body) =>
  new Promise((resolve, reject) => {
    const req = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/json",
      authorization: `Bearer ${process.env.KRANE_TOKEN ?? ""}`,
    });
    let data = "";
    req.setEncoding("utf8");
    req.on("data", (c) => (data += c));
    req.on("end", () => resolve(JSON.parse(data)));
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
const [project, environment] = (process.argv[2] ?? "").split("/");
const { workspaces } = await call("/krane.ctrl.v1.WorkspaceService/ListWorkspaces", { pageSize: 2 });
const ref = { workspace: workspaces[0].slug, project, environment };
const answers = await Promise.all([
  call("/krane.ctrl.v1.StatusService/GetEnvironmentStatus", ref),
  call("/krane.ctrl.v1.RolloutService/GetRolloutStatus", ref),
  call("/krane.ctrl.v1.InstanceEventService/ListInstanceEvents", { ...ref, latest: true }),
]);
process.stdout.write(`${answers.map((a) => JSON.stringify(a).length).join(" ")}\n`);
session.close();
