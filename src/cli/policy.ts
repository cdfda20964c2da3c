// `krane policy add | list | remove | move <project/env>`: an environment's ordered edge policies
// through ctrl's PolicyService. Every sentinel of the environment checks them in order before a
// request reaches an instance; each change is a new routing version.
import type { Command } from "commander";
import { collect, splitTarget, userAction, withConnection, type ConnectionFlags } from "./command.js";

interface AddFlags extends ConnectionFlags {
  name: string;
  kind: string;
  position?: string;
  allow?: string[];
  deny?: string[];
  trustedProxy?: string[];
  clientHeader?: string;
  maxBody?: string;
  maxHeader?: string;
  method?: string[];
  pathPrefix?: string[];
}

const UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1024,
  kb: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
};

/** "512", "64k", "10m", "1g" → bytes (base 1024). */
export function parseBytes(flag: string, v: string): bigint {
  const m = /^(\d+)\s*([a-z]*)$/i.exec(v.trim());
  const unit = m ? UNITS[(m[2] ?? "").toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`${flag}: expected a size such as 512, 64k or 10m, got "${v}"`);
  return BigInt(m[1] ?? "0") * BigInt(unit);
}

function position(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new Error(`${flag}: expected a position (0 is first), got "${v}"`);
  return Number(v);
}

/** The flags as the request's policy (ctrl checks the values and names the bad field). */
export function policyOfFlags(f: AddFlags) {
  const split = (l: string[] | undefined) => (l ?? []).flatMap((x) => x.split(",")).filter((x) => x !== "");
  if (f.kind === "ip")
    return {
      name: f.name,
      kind: {
        case: "ip" as const,
        value: {
          allow: split(f.allow),
          deny: split(f.deny),
          trustedProxies: split(f.trustedProxy),
          clientHeader: f.clientHeader ?? "",
        },
      },
    };
  if (f.kind === "limits")
    return {
      name: f.name,
      kind: {
        case: "limits" as const,
        value: {
          maxBodyBytes: f.maxBody === undefined ? 0n : parseBytes("--max-body", f.maxBody),
          maxHeaderBytes: f.maxHeader === undefined ? 0n : parseBytes("--max-header", f.maxHeader),
          methods: split(f.method).map((m) => m.toUpperCase()),
          pathPrefixes: split(f.pathPrefix),
        },
      },
    };
  throw new Error(`--kind: expected ip or limits, got "${f.kind}"`);
}

export function registerPolicyCommands(program: Command): void {
  const policy = program
    .command("policy")
    .description("edge policies: IP rules and request limits every sentinel of an environment enforces, in order");
  const print = (
    x: Parameters<Parameters<typeof userAction>[0]>[0],
    res: { policies: { name: string; summary: string; kind: { case: string | undefined } }[]; routingVersion: bigint },
  ) =>
    x.printTable(
      ["#", "NAME", "KIND", "RULE"],
      res.policies.map((p, i) => [i, p.name, p.kind.case ?? "?", p.summary]),
    );
  withConnection(
    policy
      .command("add <project/env>")
      .description("add a policy (last, or at --position)")
      .requiredOption("--name <name>", "unique in the environment: lowercase letters, digits, dashes")
      .requiredOption("--kind <kind>", "ip or limits")
      .option("--position <n>", "where in the list (0 is first; default last)")
      .option("--allow <cidr>", "ip: an allowed CIDR, IPv4 or IPv6 (repeatable, or comma-separated)", collect)
      .option("--deny <cidr>", "ip: a denied CIDR (repeatable)", collect)
      .option("--trusted-proxy <cidr>", "ip: a proxy whose forwarding header names the client (repeatable)", collect)
      .option("--client-header <name>", "ip: the forwarding header (default x-forwarded-for)")
      .option("--max-body <size>", "limits: request body size, e.g. 1m (bodies of unknown length are refused)")
      .option("--max-header <size>", "limits: total request header size, e.g. 16k")
      .option("--method <m>", "limits: an allowed method (repeatable)", collect)
      .option("--path-prefix <p>", "limits: an allowed path prefix, e.g. /api (repeatable)", collect),
    { workspace: true },
  ).action(
    userAction(async (x, target: string, f: AddFlags) => {
      const res = await x.ctrl.client(x.exposure.PolicyService).addPolicy({
        workspace: await x.ctrl.workspace(),
        ...splitTarget(target),
        policy: policyOfFlags(f),
        position: position("--position", f.position),
      });
      if (x.json) x.printJson(x.exposure.AddPolicyResponseSchema, res);
      else print(x, res);
    }),
  );
  withConnection(policy.command("list <project/env>").description("the environment's policies, in order"), {
    workspace: true,
  }).action(
    userAction(async (x, target: string) => {
      const res = await x.ctrl
        .client(x.exposure.PolicyService)
        .listPolicies({ workspace: await x.ctrl.workspace(), ...splitTarget(target) });
      if (x.json) x.printJson(x.exposure.ListPoliciesResponseSchema, res);
      else print(x, res);
    }),
  );
  withConnection(policy.command("remove <project/env> <name>").description("remove a policy"), {
    workspace: true,
  }).action(
    userAction(async (x, target: string, name: string) => {
      const res = await x.ctrl
        .client(x.exposure.PolicyService)
        .removePolicy({ workspace: await x.ctrl.workspace(), ...splitTarget(target), name });
      if (x.json) x.printJson(x.exposure.RemovePolicyResponseSchema, res);
      else print(x, res);
    }),
  );
  withConnection(
    policy
      .command("move <project/env> <name>")
      .description("move a policy to another place in the list")
      .requiredOption("--position <n>", "0 is first"),
    { workspace: true },
  ).action(
    userAction(async (x, target: string, name: string, f: ConnectionFlags & { position: string }) => {
      const res = await x.ctrl.client(x.exposure.PolicyService).movePolicy({
        workspace: await x.ctrl.workspace(),
        ...splitTarget(target),
        name,
        position: position("--position", f.position) ?? 0,
      });
      if (x.json) x.printJson(x.exposure.MovePolicyResponseSchema, res);
      else print(x, res);
    }),
  );
}
