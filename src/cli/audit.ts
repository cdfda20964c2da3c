// `krane audit [filters]`, `krane audit export --format ndjson` and `krane audit verify`: ctrl's
// audit log through its AuditService. A list follows every page; an export streams the chain in
// batches and writes one JSON line per event as they arrive (constant memory, whatever the log's
// size); verify reads the same stream and checks every event's hash and link and the chain's head
// (src/contracts/audit.ts), naming each event that was edited, deleted or moved — or checks a file
// an export wrote (`--file`).
import type { Command } from "commander";
import { workspaceCommand, type ConnectionFlags } from "./command.js";

interface AuditFlags extends ConnectionFlags {
  installation?: boolean;
  actor?: string;
  method?: string;
  target?: string;
  since?: string;
  until?: string;
  refused?: boolean;
}

/** "2024-05-01T10:00:00Z", "2024-05-01", or an age: "90m", "24h", "7d" before now. */
export function parseTime(what: string, v: string, now = Date.now()): bigint {
  const age = /^(\d+)(s|m|h|d)$/.exec(v.trim());
  if (age) {
    const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[age[2] as "s" | "m" | "h" | "d"];
    return BigInt(now - Number(age[1]) * unit);
  }
  const t = Date.parse(v);
  if (Number.isNaN(t))
    throw new Error(`${what}: expected a time (2024-05-01T10:00:00Z) or an age (90m, 24h, 7d), got "${v}"`);
  return BigInt(t);
}

function withFilters(cmd: Command): Command {
  return cmd
    .option("--installation", "the installation's chain (regions, tokens, refused calls without a valid token)")
    .option("--actor <id-or-name>", "only this actor (an API token's id or name, a cluster id)")
    .option(
      "--method <m>",
      'only this method ("CreateDeployment", "DeploymentService/CreateDeployment", "ConfigService/")',
    )
    .option("--target <id>", "only events about this id (a project, environment, deployment …)")
    .option("--since <time>", "from this time (ISO 8601) or age (24h, 7d)")
    .option("--until <time>", "before this time or age")
    .option("--refused", "only refused calls");
}

async function filterOf(x: import("./command.js").UserContext, f: AuditFlags) {
  return {
    workspace: f.installation ? "" : await x.ctrl.workspace(),
    installation: f.installation ?? false,
    actor: f.actor ?? "",
    method: f.method ?? "",
    target: f.target ?? "",
    sinceUnixMs: f.since === undefined ? 0n : parseTime("--since", f.since),
    untilUnixMs: f.until === undefined ? 0n : parseTime("--until", f.until),
    refusedOnly: f.refused ?? false,
  };
}

/** Writes to stdout, waiting when the pipe is full (an export of any size in constant memory). */
async function write(line: string): Promise<void> {
  if (!process.stdout.write(line)) await new Promise<void>((r) => process.stdout.once("drain", () => r()));
}

export function registerAuditCommands(program: Command): void {
  const audit = workspaceCommand(
    withFilters(
      program
        .command("audit")
        .description("who changed what, and which calls were refused (the workspace's audit log, oldest first)"),
    ),
    async (x, f: AuditFlags) => {
      const { AuditService, ListAuditEventsResponseSchema } = await import("../gen/krane/ctrl/v1/audit_pb.js");
      const client = x.ctrl.client(AuditService);
      const filter = await filterOf(x, f);
      const res = await x.ctrl.allPages("events", (page) => client.listAuditEvents({ filter, ...page }));
      if (x.json) {
        x.printJson(ListAuditEventsResponseSchema, res);
        return;
      }
      x.printTable(
        ["#", "TIME", "ACTOR", "METHOD", "RESULT", "TARGET", "CHANGES"],
        res.events.map((e) => [
          String(e.seq),
          new Date(Number(e.atUnixMs)).toISOString().replace(/\.\d+Z$/, "Z"),
          // A user token's scope: "installation" shown as such, a workspace token's as "workspace".
          e.actor
            ? e.actor.name === ""
              ? e.actor.kind
              : `${e.actor.name} (${[e.actor.id, e.actor.scope === "" ? "" : e.actor.scope === "installation" ? "installation" : "workspace", e.actor.owner].filter((p) => p !== "").join(", ")})`
            : "",
          e.method,
          e.code === "ok" ? "ok" : `${e.code}: ${e.message}`.slice(0, 80),
          e.targets[e.targets.length - 1] ?? "",
          e.changes
            .map((c) =>
              c.op === "set"
                ? `${c.field}: ${c.beforeJson} → ${c.afterJson}`
                : c.op === "changed"
                  ? `${c.field}: changed`
                  : `${c.field}: ${c.op}${c.op === "added" ? ` ${c.afterJson}` : ""}`,
            )
            .join("\n")
            .slice(0, 2000),
        ]),
      );
    },
  );

  workspaceCommand(
    withFilters(
      audit
        .command("export")
        .description("stream the audit log as NDJSON, one event per line (constant memory at any size)")
        .option("--format <f>", "ndjson", "ndjson"),
    ),
    async (x, f: AuditFlags & { format: string }) => {
      if (f.format !== "ndjson") throw new Error(`--format: only ndjson is supported, got "${f.format}"`);
      const [{ AuditService }, { auditRecordToJson }, { recordOf }] = await Promise.all([
        import("../gen/krane/ctrl/v1/audit_pb.js"),
        import("../contracts/audit.js"),
        import("./audit-records.js"),
      ]);
      const stream = x.ctrl.client(AuditService).exportAuditEvents({ filter: await filterOf(x, f) }, { timeoutMs: 0 });
      for await (const batch of stream) {
        let chunk = "";
        for (const e of batch.events) chunk += `${JSON.stringify(auditRecordToJson(recordOf(e)))}\n`;
        if (chunk !== "") await write(chunk);
      }
    },
  );

  workspaceCommand(
    audit
      .command("verify")
      .description(
        "check the chain: every event's hash, its link to the one before, no number missing, and the head; names each event edited, deleted or moved",
      )
      .option("--installation", "the installation's chain")
      .option("--file <ndjson>", "check a file `krane audit export` wrote instead (its head: --head-seq/--head-hash)")
      .option("--head-seq <n>", "with --file: the chain's last number, to tell events cut off the end")
      .option("--head-hash <hex>", "with --file: the chain's last hash"),
    async (x, f: ConnectionFlags & { installation?: boolean; file?: string; headSeq?: string; headHash?: string }) => {
      const [{ ChainVerifier, GENESIS_HASH, auditRecordFromJson }, { recordOf, headOf }] = await Promise.all([
        import("../contracts/audit.js"),
        import("./audit-records.js"),
      ]);
      let verifier: InstanceType<typeof ChainVerifier>;
      /** A file checked without the chain's head: the number of its last event. */
      let unheaded: number | undefined;
      if (f.file !== undefined) {
        // Without the head only the file's own events are checked: the ones after its last
        // line (and before its first) cannot be told from events never exported.
        if ((f.headSeq === undefined) !== (f.headHash === undefined))
          throw new Error("--head-seq and --head-hash: give both (the chain's last number and hash), or neither");
        if (f.headSeq !== undefined && !/^\d{1,15}$/.test(f.headSeq))
          throw new Error(`--head-seq: expected the chain's last event number, got "${f.headSeq}"`);
        if (f.headHash !== undefined && !/^[0-9a-f]{64}$/.test(f.headHash))
          throw new Error(`--head-hash: expected 64 hex digits (the chain's last hash), got "${f.headHash}"`);
        const { createReadStream } = await import("node:fs");
        const { createInterface } = await import("node:readline");
        let n = 0;
        const partial = f.headSeq === undefined;
        let v: InstanceType<typeof ChainVerifier> | undefined;
        for await (const line of createInterface({ input: createReadStream(f.file) })) {
          n++;
          if (line.trim() === "") continue;
          let rec;
          try {
            rec = auditRecordFromJson(JSON.parse(line));
          } catch (err) {
            throw new Error(`${f.file}:${n}: ${err instanceof Error ? err.message : String(err)}`);
          }
          v ??= new ChainVerifier(
            {
              workspaceId: rec.workspaceId,
              seq: Number(f.headSeq ?? 0),
              hash: f.headHash ?? GENESIS_HASH,
              prunedThroughSeq: rec.seq - 1,
              prunedThroughHash: rec.prevHash,
            },
            partial,
          );
          v.add(rec);
          if (partial) unheaded = rec.seq;
        }
        if (!v) throw new Error(`${f.file}: no events`);
        verifier = v;
      } else {
        const { AuditService } = await import("../gen/krane/ctrl/v1/audit_pb.js");
        const filter = {
          workspace: f.installation ? "" : await x.ctrl.workspace(),
          installation: f.installation ?? false,
        };
        let v: InstanceType<typeof ChainVerifier> | undefined;
        for await (const batch of x.ctrl.client(AuditService).exportAuditEvents({ filter }, { timeoutMs: 0 })) {
          if (batch.head) v = new ChainVerifier(headOf(batch.head));
          if (!v) throw new Error("ctrl's export did not start with the chain's head");
          for (const e of batch.events) v.add(recordOf(e));
        }
        if (!v) throw new Error("ctrl answered no chain head");
        verifier = v;
      }
      const problems = verifier.finish();
      // The head checked against: what an auditor keeps to check a later export with --file.
      const head = unheaded === undefined ? { seq: verifier.head.seq, hash: verifier.head.hash } : null;
      if (x.json) process.stdout.write(`${JSON.stringify({ checked: verifier.checked, head, problems }, null, 2)}\n`);
      else if (problems.length === 0)
        process.stdout.write(
          unheaded === undefined
            ? `ok: ${verifier.checked} events, every hash and link holds, head #${verifier.head.seq}\n`
            : `ok: ${verifier.checked} events, every hash and link holds, through #${unheaded} (no --head-seq/--head-hash: events after it are not checked)\n`,
        );
      else for (const p of problems) process.stdout.write(`${p.problem}\n`);
      if (problems.length > 0) process.exitCode = 1;
    },
  );
}
