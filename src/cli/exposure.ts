// `krane endpoint set | list | delete` and `krane domain add | list | verify | remove`: an
// environment's exposure through ctrl's EndpointService and DomainService. Endpoints put the
// environment's sentinel on the platform's public or organization Gateway (a generated hostname,
// or a path prefix of the workspace's shared host) with optional JWT checks at the edge; custom
// domains are routed once their TXT record proves ownership.
import type { Command } from "commander";
import { collect, environmentRef, splitTarget, when, workspaceCommand, type ConnectionFlags } from "./command.js";

interface EndpointFlags extends ConnectionFlags {
  visibility: string;
  pathRouting?: boolean;
  pathPrefix?: string;
  jwksUrl?: string;
  issuer?: string;
  audience?: string[];
  operation?: string[];
  defaultAction?: string;
}

/** "GET /books/{id}=books:read,books:list" (scopes optional) → an operation. */
export function parseOperation(v: string): { method: string; path: string; scopes: string[] } {
  const m = /^([A-Za-z*]+)\s+(\S+?)(?:=(\S*))?$/.exec(v.trim());
  if (!m || m[1] === undefined || m[2] === undefined)
    throw new Error(`--operation: expected "METHOD /path[=scope,scope]", got "${v}"`);
  return { method: m[1].toUpperCase(), path: m[2], scopes: m[3] ? m[3].split(",").filter((s) => s !== "") : [] };
}

export function registerExposureCommands(program: Command): void {
  const ep = program.command("endpoint").description("expose an environment through the platform's Gateways");
  workspaceCommand(
    ep
      .command("set <project/env>")
      .description("create or replace the environment's endpoint of a visibility")
      .option("--visibility <v>", "public or organization", "public")
      .option(
        "--path-routing",
        "route under a path prefix of the workspace's shared host (rewritten away) instead of a hostname of its own",
      )
      .option("--path-prefix <prefix>", "with --path-routing: the prefix (default /<project>/<env>)")
      .option("--jwks-url <url>", "check bearer tokens against this JWKS (https)")
      .option("--issuer <iss>", "with --jwks-url: the tokens' issuer")
      .option("--audience <aud>", "with --jwks-url: an accepted audience (repeatable)", collect)
      .option("--operation <spec>", 'with --jwks-url: "METHOD /path/{param}=scope,scope" (repeatable)', collect)
      .option("--default-action <a>", "with --jwks-url: deny or allow requests matching no operation (default deny)"),
    async (x, target: string, f: EndpointFlags) => {
      const { project, environment } = splitTarget(target);
      const authGiven =
        f.issuer !== undefined ||
        f.audience !== undefined ||
        f.operation !== undefined ||
        f.defaultAction !== undefined;
      if (authGiven && f.jwksUrl === undefined)
        throw new Error("--issuer, --audience, --operation and --default-action need --jwks-url");
      const auth =
        f.jwksUrl === undefined
          ? undefined
          : {
              jwksUrl: f.jwksUrl,
              issuer: f.issuer ?? "",
              audiences: f.audience ?? [],
              operations: (f.operation ?? []).map(parseOperation),
              defaultAction: f.defaultAction ?? "",
            };
      const { endpoint } = await x.ctrl.client(x.exposure.EndpointService).setEndpoint({
        workspace: await x.ctrl.workspace(),
        project,
        environment,
        visibility: f.visibility,
        pathRouting: f.pathRouting ?? false,
        pathPrefix: f.pathPrefix ?? "",
        auth,
      });
      if (!endpoint) return;
      if (x.json) x.printJson(x.exposure.EndpointSchema, endpoint);
      else
        x.printTable(
          ["VISIBILITY", "URL", "AUTH"],
          [
            [
              endpoint.visibility,
              endpoint.url,
              endpoint.auth
                ? `jwt (${endpoint.auth.operations.length} operations, default ${endpoint.auth.defaultAction})`
                : "-",
            ],
          ],
        );
    },
  );
  workspaceCommand(
    ep.command("list <project/env>").description("the environment's endpoints"),
    async (x, target: string) => {
      const ref = await environmentRef(x, target);
      const res = await x.ctrl.client(x.exposure.EndpointService).listEndpoints({ ...ref });
      if (x.json) x.printJson(x.exposure.ListEndpointsResponseSchema, res);
      else
        x.printTable(
          ["VISIBILITY", "URL", "AUTH", "UPDATED"],
          res.endpoints.map((e) => [e.visibility, e.url, e.auth ? "jwt" : "-", when(e.updatedAtUnixMs)]),
        );
    },
  );
  workspaceCommand(
    ep
      .command("delete <project/env>")
      .description("remove an endpoint (its routes go in every region)")
      .option("--visibility <v>", "public or organization", "public"),
    async (x, target: string, f: ConnectionFlags & { visibility: string }) => {
      const ref = await environmentRef(x, target);
      await x.ctrl.client(x.exposure.EndpointService).deleteEndpoint({ ...ref, visibility: f.visibility });
      if (!x.json) process.stdout.write(`deleted the ${f.visibility} endpoint of ${target}\n`);
    },
  );

  const dom = program
    .command("domain")
    .description("custom domains of an environment (routed once ownership is verified)");
  workspaceCommand(
    dom
      .command("add <project/env> <hostname>")
      .description("claim a domain; prints the TXT record that proves ownership"),
    async (x, target: string, hostname: string) => {
      const ref = await environmentRef(x, target);
      const { domain } = await x.ctrl.client(x.exposure.DomainService).addDomain({ ...ref, hostname });
      if (!domain) return;
      if (x.json) x.printJson(x.exposure.DomainSchema, domain);
      else {
        x.printTable(
          ["DOMAIN", "STATE", "TXT NAME", "TXT VALUE"],
          [[domain.hostname, domain.state, domain.txtName, domain.txtValue]],
        );
        process.stdout.write("Create the TXT record; krane checks it on a schedule (or now: krane domain verify).\n");
      }
    },
  );
  const domainRows = (
    domains: {
      hostname: string;
      state: string;
      lastError: string;
      lastCheckedAtUnixMs: bigint;
      nextCheckAtUnixMs: bigint;
    }[],
  ): string[][] =>
    domains.map((d) => [
      d.hostname,
      d.state,
      d.lastError || "-",
      when(d.lastCheckedAtUnixMs),
      when(d.nextCheckAtUnixMs),
    ]);
  workspaceCommand(
    dom.command("list <project/env>").description("the environment's domains and their verification"),
    async (x, target: string) => {
      const ref = await environmentRef(x, target);
      const res = await x.ctrl.client(x.exposure.DomainService).listDomains({ ...ref });
      if (x.json) x.printJson(x.exposure.ListDomainsResponseSchema, res);
      else x.printTable(["DOMAIN", "STATE", "LAST ERROR", "CHECKED", "NEXT CHECK"], domainRows(res.domains));
    },
  );
  workspaceCommand(
    dom.command("verify <project/env> <hostname>").description("check the domain's TXT record now"),
    async (x, target: string, hostname: string) => {
      const ref = await environmentRef(x, target);
      const { domain } = await x.ctrl.client(x.exposure.DomainService).verifyDomain({ ...ref, hostname });
      if (!domain) return;
      if (x.json) x.printJson(x.exposure.DomainSchema, domain);
      else x.printTable(["DOMAIN", "STATE", "LAST ERROR", "CHECKED", "NEXT CHECK"], domainRows([domain]));
    },
  );
  workspaceCommand(
    dom.command("remove <project/env> <hostname>").description("release the domain (its routes and certificates go)"),
    async (x, target: string, hostname: string) => {
      const ref = await environmentRef(x, target);
      await x.ctrl.client(x.exposure.DomainService).removeDomain({ ...ref, hostname });
      if (!x.json) process.stdout.write(`removed ${hostname} from ${target}\n`);
    },
  );
}
