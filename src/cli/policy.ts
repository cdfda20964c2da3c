// `krane policy add | list | remove | move <project/env>`: an environment's ordered edge policies
// through ctrl's PolicyService. Every sentinel of the environment checks them in order before a
// request reaches an instance; each change is a new routing version.
import type { Client } from "@connectrpc/connect";
import type { Command } from "commander";
import type { EdgePolicy, PolicyService } from "../gen/krane/ctrl/v1/exposure_pb.js";
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
  per?: string;
  header?: string;
  limit?: string;
  window?: string;
  forwardHeader?: string;
}

/** "100" → 100n; anything else is left for ctrl to name (0n is refused there as limit 0). */
function whole(flag: string, v: string | undefined): bigint {
  if (v === undefined) return 0n;
  if (!/^-?\d+$/.test(v.trim())) throw new Error(`${flag}: expected a whole number, got "${v}"`);
  return BigInt(v.trim());
}

/** "60", "60s", "1m", "1h", "1d" → seconds. */
export function parseWindow(flag: string, v: string | undefined): bigint {
  if (v === undefined) return 0n;
  const m = /^(-?\d+)\s*(s|m|h|d)?$/i.exec(v.trim());
  if (!m) throw new Error(`${flag}: expected a window such as 60s, 1m or 1h, got "${v}"`);
  const unit = { s: 1n, m: 60n, h: 3600n, d: 86400n }[(m[2] ?? "s").toLowerCase() as "s"];
  return BigInt(m[1] ?? "0") * unit;
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
  const bytes = (flag: string, v: string | undefined) => (v === undefined ? 0n : parseBytes(flag, v));
  let kind;
  if (f.kind === "ip") {
    const value = { allow: split(f.allow), deny: split(f.deny), trustedProxies: split(f.trustedProxy) };
    kind = { case: "ip" as const, value: { ...value, clientHeader: f.clientHeader ?? "" } };
  } else if (f.kind === "limits") {
    const sizes = { maxBodyBytes: bytes("--max-body", f.maxBody), maxHeaderBytes: bytes("--max-header", f.maxHeader) };
    kind = {
      case: "limits" as const,
      value: { ...sizes, methods: split(f.method).map((m) => m.toUpperCase()), pathPrefixes: split(f.pathPrefix) },
    };
  } else if (f.kind === "ratelimit") {
    const value = {
      key: f.per ?? "",
      header: f.header ?? "",
      limit: whole("--limit", f.limit),
      windowSeconds: parseWindow("--window", f.window),
      trustedProxies: split(f.trustedProxy),
      clientHeader: f.clientHeader ?? "",
    };
    kind = { case: "rateLimit" as const, value };
  } else if (f.kind === "apikey") {
    kind = { case: "apiKey" as const, value: { header: f.header ?? "", forwardHeader: f.forwardHeader ?? "" } };
  } else throw new Error(`--kind: expected ip, limits, ratelimit or apikey, got "${f.kind}"`);
  return { name: f.name, kind };
}

type Ctx = Parameters<Parameters<typeof userAction>[0]>[0];
type Call = (
  svc: Client<typeof PolicyService>,
  base: { workspace: string; project: string; environment: string },
) => Promise<{ policies: EdgePolicy[]; routingVersion: bigint }>;

/** Calls PolicyService for `target` and prints the list it answers (as JSON with --json). */
async function answerList(x: Ctx, target: string, call: Call): Promise<void> {
  const svc = x.ctrl.client(x.exposure.PolicyService);
  const res = await call(svc, { workspace: await x.ctrl.workspace(), ...splitTarget(target) });
  // Loaded when the command runs: `krane --help` and the other commands never load protobuf-es.
  const { create } = await import("@bufbuild/protobuf");
  const list = create(x.exposure.ListPoliciesResponseSchema, {
    policies: res.policies,
    routingVersion: res.routingVersion,
  });
  if (x.json) x.printJson(x.exposure.ListPoliciesResponseSchema, list);
  else
    x.printTable(
      ["#", "NAME", "KIND", "RULE"],
      list.policies.map((p, i) => [i, p.name, p.kind.case ?? "?", p.summary]),
    );
}

export function registerPolicyCommands(program: Command): void {
  const policy = program
    .command("policy")
    .description(
      "edge policies: IP rules, request limits and rate limits every sentinel of an environment enforces, in order",
    );
  withConnection(
    policy
      .command("add <project/env>")
      .description("add a policy (last, or at --position)")
      .requiredOption("--name <name>", "unique in the environment: lowercase letters, digits, dashes")
      .requiredOption("--kind <kind>", "ip, limits, ratelimit or apikey (keys from `krane key create`)")
      .option("--position <n>", "where in the list (0 is first; default last)")
      .option("--allow <cidr>", "ip: an allowed CIDR, IPv4 or IPv6 (repeatable, or comma-separated)", collect)
      .option("--deny <cidr>", "ip: a denied CIDR (repeatable)", collect)
      .option(
        "--trusted-proxy <cidr>",
        "ip, ratelimit --per address: a proxy whose forwarding header names the client (repeatable)",
        collect,
      )
      .option("--client-header <name>", "ip: the forwarding header (default x-forwarded-for)")
      .option("--max-body <size>", "limits: request body size, e.g. 1m (bodies of unknown length are refused)")
      .option("--max-header <size>", "limits: total request header size, e.g. 16k")
      .option("--method <m>", "limits: an allowed method (repeatable)", collect)
      .option("--path-prefix <p>", "limits: an allowed path prefix, e.g. /api (repeatable)", collect)
      .option("--per <key>", "ratelimit: a budget per address, header, jwt (verified subject) or apikey (verified key)")
      .option("--header <name>", "ratelimit --per header: the counted header; apikey: the key's (default x-api-key)")
      .option("--forward-header <name>", "apikey: the header the app gets the key's id, name and metadata in")
      .option("--limit <n>", "ratelimit: requests allowed per window")
      .option("--window <w>", "ratelimit: the window, e.g. 60s, 1m, 1h"),
    { workspace: true },
  ).action(
    userAction((x, target: string, f: AddFlags) =>
      answerList(x, target, (svc, base) =>
        svc.addPolicy({ ...base, policy: policyOfFlags(f), position: position("--position", f.position) }),
      ),
    ),
  );
  const list = policy.command("list <project/env>").description("the environment's policies, in order");
  withConnection(list, { workspace: true }).action(
    userAction((x, target: string) => answerList(x, target, (svc, base) => svc.listPolicies(base))),
  );
  const remove = policy.command("remove <project/env> <name>").description("remove a policy");
  withConnection(remove, { workspace: true }).action(
    userAction((x, target: string, name: string) =>
      answerList(x, target, (svc, base) => svc.removePolicy({ ...base, name })),
    ),
  );
  const move = policy
    .command("move <project/env> <name> <position>")
    .description("move a policy to another place in the list (0 is first)");
  withConnection(move, { workspace: true }).action(
    userAction((x, target: string, name: string, at: string) =>
      answerList(x, target, (svc, base) =>
        svc.movePolicy({ ...base, name, position: position("<position>", at) ?? 0 }),
      ),
    ),
  );
}
