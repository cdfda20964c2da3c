// `krane region create | list | clusters` and `krane cluster-token create | revoke`: regions, the
// clusters registered in them (with each agent's last heartbeat and build next to ctrl's own
// build), and the agents' tokens, through ctrl's RegionService.
import type { Command } from "commander";
import { userCommand, when, type ConnectionFlags } from "./command.js";

/** An agent's build as `region clusters` shows it: flagged when it is not ctrl's. */
export function agentBuildCell(agentBuild: string, ctrlBuild: string): string {
  if (!agentBuild) return "-";
  return ctrlBuild && agentBuild !== ctrlBuild ? `${agentBuild} (ctrl: ${ctrlBuild})` : agentBuild;
}

export function registerRegionCommands(program: Command): void {
  const region = program.command("region").description("regions and their clusters");
  userCommand(region.command("create <name>").description("register a region"), async (x, name: string) => {
    const { region: r } = await x.ctrl.client(x.api.RegionService).createRegion({ name });
    if (!r) return;
    if (x.json) x.printJson(x.api.RegionSchema, r);
    else x.printTable(["REGION", "CREATED"], [[r.name, when(r.createdAtUnixMs)]]);
  });
  userCommand(region.command("list").description("list regions"), async (x) => {
    const regions = x.ctrl.client(x.api.RegionService);
    const res = await x.ctrl.allPages("regions", (page) => regions.listRegions(page));
    if (x.json) x.printJson(x.api.ListRegionsResponseSchema, res);
    else
      x.printTable(
        ["REGION", "CREATED"],
        res.regions.map((r) => [r.name, when(r.createdAtUnixMs)]),
      );
  });
  userCommand(
    region
      .command("clusters [region]")
      .description("list clusters, their last heartbeat and agent build, and ctrl's build"),
    async (x, name: string | undefined) => {
      const regions = x.ctrl.client(x.api.RegionService);
      const res = await x.ctrl.allPages("clusters", (page) => regions.listClusters({ region: name ?? "", ...page }));
      const ctrlBuild = x.ctrl.ctrlBuild;
      if (x.json) {
        const json = x.toJson(x.api.ListClustersResponseSchema, res, { alwaysEmitImplicit: true }) as object;
        process.stdout.write(`${JSON.stringify({ ...json, ctrlBuild }, null, 2)}\n`);
        return;
      }
      process.stdout.write(`ctrl build: ${ctrlBuild || "unknown (ctrl sent no version header)"}\n`);
      x.printTable(
        ["REGION", "CLUSTER", "TOKEN", "LAST HEARTBEAT", "BEHIND", "AGENT", "BUILD", "ID"],
        res.clusters.map((k) => [
          k.region,
          k.name,
          k.tokenRevoked ? "revoked" : "active",
          when(k.lastHeartbeatUnixMs),
          String(k.changesBehind),
          k.agentId || "-",
          agentBuildCell(k.build, ctrlBuild),
          k.id,
        ]),
      );
    },
  );

  const token = program.command("cluster-token").description("agent tokens");
  userCommand(
    token
      .command("create <region>")
      .description("register a cluster in a region and print its agent token (shown once)")
      .option("--cluster <name>", "cluster name", "default"),
    async (x, name: string, f: ConnectionFlags & { cluster: string }) => {
      const res = await x.ctrl.client(x.api.RegionService).createClusterToken({ region: name, clusterName: f.cluster });
      if (x.json) x.printJson(x.api.CreateClusterTokenResponseSchema, res);
      else process.stdout.write(`${res.token}\n`);
    },
  );
  userCommand(
    token
      .command("revoke <region>")
      .description("cut off a cluster's agent token (the cluster stays registered; `create` issues a new token)")
      .option("--cluster <name>", "cluster name", "default"),
    async (x, name: string, f: ConnectionFlags & { cluster: string }) => {
      const { cluster } = await x.ctrl
        .client(x.api.RegionService)
        .revokeClusterToken({ region: name, clusterName: f.cluster });
      if (!cluster) return;
      if (x.json) x.printJson(x.api.ClusterSchema, cluster);
      else process.stdout.write(`revoked the agent token of cluster ${cluster.name} in region ${cluster.region}\n`);
    },
  );
}
