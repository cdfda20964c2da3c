// `krane repo connect | list | show | update | disconnect`: a project's git repository through
// ctrl's RepositoryService. Its pushes (GitHub or GitLab push events to the webhook path) build
// the pushed commit and deploy it to the environment its branch is mapped to; with --previews, its
// pull requests build their head commit into a preview of that environment. The token, deploy
// key and webhook secret are read from a file, stdin ("-") or env:NAME, never from the command
// line, and ctrl never shows them again.
import type { Command } from "commander";
import { readSecret, when, workspaceCommand, type ConnectionFlags, type UserContext } from "./command.js";
import type { Repository } from "../gen/krane/ctrl/v1/repository_pb.js";

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/repository_pb.js");
  return { m, client: x.ctrl.client(m.RepositoryService) };
}

const HEAD = ["PROJECT", "URL", "PROVIDER", "CREDENTIAL", "BRANCHES", "PREVIEWS", "STATUSES", "WEBHOOK PATH"];

function row(r: Repository): string[] {
  return [
    r.project,
    r.url,
    r.provider,
    r.credential,
    r.branches.join(" "),
    r.previews === "" ? "-" : `${r.previews}${r.buildForks ? " (forks too)" : ""}`,
    r.reportsStatus ? "yes" : "no",
    r.webhookPath,
  ];
}

const collect = (v: string, all: string[]): string[] => [...all, v];

const PREVIEWS_HELP = "build each pull request's head commit into a preview made from this environment";
const FORKS_HELP = "build pull requests from forks too (their code runs in the build; off by default)";

export function registerRepoCommands(program: Command): void {
  const repo = program
    .command("repo")
    .description("a project's git repository: each push builds the commit and deploys it to its branch's environment");
  workspaceCommand(
    repo
      .command("connect <project> <url>")
      .description("connect a project to its repository (https://host/owner/name.git or git@host:owner/name.git)")
      .requiredOption("--provider <p>", "github or gitlab (whose push events and commit statuses)")
      .requiredOption("--branch <branch=env>", "map a branch to an environment (repeat)", collect, [])
      .requiredOption(
        "--webhook-secret-file <file>",
        'the webhook secret given to the provider (a file, "-" for stdin, or env:NAME)',
      )
      .option("--token-file <file>", "an https URL's access token (file, - or env:NAME); none: a public repository")
      .option("--token-username <user>", 'the user name sent with the token (default "x-access-token")')
      .option("--deploy-key-file <file>", "an ssh URL's deploy key, a private key (file, - or env:NAME)")
      .option("--status-token-file <file>", "a token for the commit-status API (default: the access token)")
      .option(
        "--status-api-url <url>",
        "the provider's API (default https://api.github.com, https://gitlab.com/api/v4)",
      )
      .option("--previews <env>", PREVIEWS_HELP)
      .option("--build-forks", FORKS_HELP),
    async (
      x,
      project: string,
      url: string,
      f: ConnectionFlags & {
        provider: string;
        branch: string[];
        webhookSecretFile: string;
        tokenFile?: string;
        tokenUsername?: string;
        deployKeyFile?: string;
        statusTokenFile?: string;
        statusApiUrl?: string;
        previews?: string;
        buildForks?: boolean;
      },
    ) => {
      const { m, client } = await service(x);
      const { repository: r } = await client.connectRepository({
        workspace: await x.ctrl.workspace(),
        project,
        url,
        provider: f.provider,
        branches: f.branch,
        webhookSecret: await readSecret("--webhook-secret-file", f.webhookSecretFile),
        token: await readSecret("--token-file", f.tokenFile),
        tokenUsername: f.tokenUsername ?? "",
        deployKey: f.deployKeyFile === undefined ? "" : `${await readSecret("--deploy-key-file", f.deployKeyFile)}\n`,
        statusToken: await readSecret("--status-token-file", f.statusTokenFile),
        statusApiUrl: f.statusApiUrl ?? "",
        previews: f.previews ?? "",
        buildForks: f.buildForks === true,
      });
      if (!r) return;
      if (x.json) x.printJson(m.RepositorySchema, r);
      else
        process.stdout.write(
          `connected ${r.project} to ${r.url}: give ${r.provider} the URL <ctrl's webhook address>${r.webhookPath} (content type application/json, push${r.previews === "" ? "" : " and pull request"} events) and the same secret\n`,
        );
    },
  );
  workspaceCommand(repo.command("list").description("list the workspace's repositories"), async (x) => {
    const { m, client } = await service(x);
    const res = await client.listRepositories({ workspace: await x.ctrl.workspace() });
    if (x.json) x.printJson(m.ListRepositoriesResponseSchema, res);
    else x.printTable(HEAD, res.repositories.map(row));
  });
  workspaceCommand(
    repo.command("show <project>").description("a project's repository (never its credentials)"),
    async (x, project: string) => {
      const { m, client } = await service(x);
      const { repository: r } = await client.getRepository({ workspace: await x.ctrl.workspace(), project });
      if (!r) return;
      if (x.json) x.printJson(m.RepositorySchema, r);
      else
        x.printTable(
          ["FIELD", "VALUE"],
          [
            ["project", r.project],
            ["url", r.url],
            ["provider", r.provider],
            ["transport", r.transport],
            ["path", r.path],
            ["credential", r.credential],
            ["branches", r.branches.join(" ")],
            ["previews", r.previews === "" ? "-" : `from ${r.previews}${r.buildForks ? ", forks too" : ", not forks"}`],
            ["webhook path", r.webhookPath],
            ["status api", r.reportsStatus ? r.statusApiUrl : "-"],
            ["connected", when(r.createdAtUnixMs)],
            ["updated", when(r.updatedAtUnixMs)],
          ],
        );
    },
  );
  workspaceCommand(
    repo
      .command("update <project>")
      .description("replace the branch → environment map, or how pull requests build")
      .option("--branch <branch=env>", "map a branch to an environment (repeat; the whole map)", collect, [])
      .option("--previews <env>", `${PREVIEWS_HELP}; "" turns them off`)
      .option("--build-forks", FORKS_HELP)
      .option("--no-build-forks", "stop building forks' pull requests"),
    async (x, project: string, f: ConnectionFlags & { branch: string[]; previews?: string; buildForks?: boolean }) => {
      const { m, client } = await service(x);
      const { repository: r } = await client.updateRepository({
        workspace: await x.ctrl.workspace(),
        project,
        branches: f.branch,
        ...(f.previews === undefined ? {} : { previews: f.previews }),
        ...(f.buildForks === undefined ? {} : { buildForks: f.buildForks }),
      });
      if (!r) return;
      if (x.json) x.printJson(m.RepositorySchema, r);
      else process.stdout.write(`${r.project}: ${r.branches.join(" ")}\n`);
    },
  );
  workspaceCommand(
    repo.command("disconnect <project>").description("forget the project's repository and its credentials"),
    async (x, project: string) => {
      const { client } = await service(x);
      await client.disconnectRepository({ workspace: await x.ctrl.workspace(), project });
      process.stdout.write(`disconnected ${project}\n`);
    },
  );
}
