// `krane preview create | list | delete | approve | limits | hook add | hook list | hook delete`:
// preview environments through ctrl's PreviewService. A preview copies an environment's
// configuration (secrets only with --with-secrets), runs one image in one region at one replica
// at a generated hostname, and is deleted when its TTL passes; a pull-request hook makes and
// deletes them from GitHub or GitLab webhooks.
import type { Command } from "commander";
import { readSecret, splitTarget, when, workspaceCommand, type ConnectionFlags, type UserContext } from "./command.js";
import type { Preview, PreviewHook } from "../gen/krane/ctrl/v1/preview_pb.js";

/** "72h", "90m", "3d", "45s" → seconds. */
export function parseTtl(v: string): bigint {
  const m = /^(\d+)(s|m|h|d)$/.exec(v.trim());
  if (!m) throw new Error(`--ttl: expected a duration such as 72h, 90m or 3d, got "${v}"`);
  const unit = { s: 1, m: 60, h: 3600, d: 86_400 }[m[2] as "s" | "m" | "h" | "d"];
  return BigInt(Number(m[1]) * unit);
}

function previewRow(p: Preview): string[] {
  return [
    `${p.project}/${p.name}`,
    p.baseEnvironment,
    p.state,
    p.url === "" ? "-" : p.url,
    p.image,
    p.region,
    when(p.expiresAtUnixMs),
    p.pullRequest ? `${p.pullRequest.provider} #${p.pullRequest.number}${p.pullRequest.fork ? " (fork)" : ""}` : "cli",
  ];
}

const PREVIEW_HEAD = ["PREVIEW", "BASE", "STATE", "URL", "IMAGE", "REGION", "EXPIRES", "FROM"];

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/preview_pb.js");
  return { m, client: x.ctrl.client(m.PreviewService) };
}

function hookRow(h: PreviewHook): string[] {
  return [
    h.id,
    `${h.project}/${h.baseEnvironment}`,
    `${h.provider} ${h.repository}`,
    h.verification,
    h.imageTemplate,
    h.reportsStatus ? h.statusApiUrl : "-",
    h.path,
  ];
}

/** A preview named "project/name" in the workspace. */
async function previewRef(
  x: UserContext,
  target: string,
): Promise<{ workspace: string; project: string; name: string }> {
  const { project, environment: name } = splitTarget(target);
  return { workspace: await x.ctrl.workspace(), project, name };
}

export function registerPreviewCommands(program: Command): void {
  const preview = program
    .command("preview")
    .description("short-lived copies of an environment (e.g. one per pull request)");

  workspaceCommand(
    preview
      .command("create <project/base-env>")
      .description(
        "create a preview of an environment: its configuration, one region, one replica that sleeps after 15 idle minutes and wakes at the next request, its own hostname",
      )
      .requiredOption("--name <name>", "the preview's name (e.g. pr-123)")
      .requiredOption("--image <image>", "the image it runs")
      .option("--ttl <duration>", "deleted this long after creation (default 72h, at most 30d)")
      .option("--region <region>", "the region it runs in (default: the base's first)")
      .option("--with-secrets", "copy the base environment's secrets too"),
    async (
      x,
      target: string,
      f: ConnectionFlags & { name: string; image: string; ttl?: string; region?: string; withSecrets?: boolean },
    ) => {
      const { project, environment } = splitTarget(target);
      const { m, client } = await service(x);
      const { preview: p } = await client.createPreview({
        workspace: await x.ctrl.workspace(),
        project,
        baseEnvironment: environment,
        name: f.name,
        image: f.image,
        ttlSeconds: f.ttl === undefined ? 0n : parseTtl(f.ttl),
        region: f.region ?? "",
        withSecrets: f.withSecrets ?? false,
      });
      if (!p) return;
      if (x.json) x.printJson(m.PreviewSchema, p);
      else x.printTable(PREVIEW_HEAD, [previewRow(p)]);
    },
  );

  workspaceCommand(
    preview.command("list [project]").description("list previews (of a project)"),
    async (x, project: string | undefined) => {
      const { m, client } = await service(x);
      const workspace = await x.ctrl.workspace();
      const res = await x.ctrl.allPages("previews", (page) =>
        client.listPreviews({ workspace, project: project ?? "", ...page }),
      );
      if (x.json) x.printJson(m.ListPreviewsResponseSchema, res);
      else x.printTable(PREVIEW_HEAD, res.previews.map(previewRow));
    },
  );

  workspaceCommand(
    preview.command("delete <project/name>").description("delete a preview with everything it runs, in every region"),
    async (x, target: string) => {
      const { m, client } = await service(x);
      const { preview: p } = await client.deletePreview(await previewRef(x, target));
      if (!p) return;
      if (x.json) x.printJson(m.PreviewSchema, p);
      else process.stdout.write(`deleting preview ${p.project}/${p.name}\n`);
    },
  );

  workspaceCommand(
    preview
      .command("approve <project/name>")
      .description("start a preview that waits for approval (a pull request from a fork; it never gets secrets)"),
    async (x, target: string) => {
      const { m, client } = await service(x);
      const { preview: p } = await client.approvePreview(await previewRef(x, target));
      if (!p) return;
      if (x.json) x.printJson(m.PreviewSchema, p);
      else x.printTable(PREVIEW_HEAD, [previewRow(p)]);
    },
  );

  workspaceCommand(
    preview
      .command("limits")
      .description(
        "show the workspace's preview settings, or change them (how many previews it may have: `krane quota`)",
      )
      .option("--fork-approval <on|off>", "pull requests from forks wait for `krane preview approve`"),
    async (x, f: ConnectionFlags & { forkApproval?: string }) => {
      const { m, client } = await service(x);
      const workspace = await x.ctrl.workspace();
      if (f.forkApproval !== undefined) {
        if (f.forkApproval !== "on" && f.forkApproval !== "off") throw new Error('--fork-approval: "on" or "off"');
        await client.setPreviewLimits({ workspace, limits: { forkApproval: f.forkApproval === "on" } });
      }
      const now = await client.getPreviewLimits({ workspace });
      if (x.json) x.printJson(m.GetPreviewLimitsResponseSchema, now);
      else if (now.limits)
        x.printTable(
          ["SETTING", "VALUE"],
          [
            ["previews", String(now.previews)],
            ["fork approval", now.limits.forkApproval ? "on" : "off"],
          ],
        );
    },
  );

  const hook = preview.command("hook").description("pull-request webhooks of GitHub and GitLab that make previews");
  workspaceCommand(
    hook
      .command("add <project/base-env>")
      .description(
        "register a pull-request webhook: opened/synchronize creates or updates the preview pr-<n> (GitLab: mr-<n>), closed/merged deletes it",
      )
      .requiredOption("--provider <p>", "github or gitlab")
      .requiredOption("--repository <repo>", 'GitHub "owner/name"; GitLab "group/name" or the project id')
      .requiredOption(
        "--secret-file <file>",
        'the webhook secret (a file, "-" for stdin, or env:NAME); GitLab: a signing token whsec_… (signed) or a secret token',
      )
      .requiredOption("--image-template <template>", "the preview's image: {sha} {short_sha} {pr} {branch}")
      .option("--status-token-file <file>", "a token for the commit-status API (file, - or env:NAME)")
      .option(
        "--status-api-url <url>",
        "the provider's API (default https://api.github.com, https://gitlab.com/api/v4)",
      )
      .option("--region <region>", "the previews' region (default: the base's first)")
      .option("--ttl <duration>", "each preview's TTL, from its last push (default 72h)")
      .option("--with-secrets", "copy the base's secrets into previews of pull requests that are not from forks"),
    async (
      x,
      target: string,
      f: ConnectionFlags & {
        provider: string;
        repository: string;
        secretFile: string;
        imageTemplate: string;
        statusTokenFile?: string;
        statusApiUrl?: string;
        region?: string;
        ttl?: string;
        withSecrets?: boolean;
      },
    ) => {
      const { project, environment } = splitTarget(target);
      const { m, client } = await service(x);
      const { hook: h } = await client.createPreviewHook({
        workspace: await x.ctrl.workspace(),
        project,
        baseEnvironment: environment,
        provider: f.provider,
        repository: f.repository,
        secret: await readSecret("--secret-file", f.secretFile),
        imageTemplate: f.imageTemplate,
        region: f.region ?? "",
        ttlSeconds: f.ttl === undefined ? 0n : parseTtl(f.ttl),
        withSecrets: f.withSecrets ?? false,
        statusApiUrl: f.statusApiUrl ?? "",
        statusToken: await readSecret("--status-token-file", f.statusTokenFile),
      });
      if (!h) return;
      if (x.json) x.printJson(m.PreviewHookSchema, h);
      else
        process.stdout.write(
          `hook ${h.id}: give ${h.provider} the URL <ctrl's webhook address>${h.path} (content type application/json, pull request events) and the same secret\n`,
        );
    },
  );
  workspaceCommand(hook.command("list").description("list the workspace's pull-request hooks"), async (x) => {
    const { m, client } = await service(x);
    const workspace = await x.ctrl.workspace();
    const res = await x.ctrl.allPages("hooks", (page) => client.listPreviewHooks({ workspace, ...page }));
    if (x.json) x.printJson(m.ListPreviewHooksResponseSchema, res);
    else
      x.printTable(["ID", "BASE", "REPOSITORY", "VERIFIED BY", "IMAGE", "STATUS API", "PATH"], res.hooks.map(hookRow));
  });
  workspaceCommand(hook.command("delete <id>").description("remove a pull-request hook"), async (x, id: string) => {
    const { client } = await service(x);
    await client.deletePreviewHook({ workspace: await x.ctrl.workspace(), hookId: id });
    process.stdout.write(`deleted hook ${id}\n`);
  });
}
