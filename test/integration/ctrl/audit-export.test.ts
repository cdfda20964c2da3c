// `krane audit export --format ndjson` and `krane audit verify` over a chain of 100,000 events, with
// ctrl and the CLI as real processes: every event arrives once, in order, as one JSON line; and
// neither process holds the log in memory. Each runs with a JavaScript heap capped well below the
// size of what is exported (ctrl 128 MiB, the CLI 96 MiB, for about 130 MiB of NDJSON): a side
// that gathered the events, or a server that wrote faster than the client reads, would run out of
// heap and die. The peak RSS of both (sampled from /proc) is printed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { KRANE_BIN, spawnCtrl, type CtrlProcess } from "./process.js";
import { tempDir } from "./support.js";
import { seedAuditEvents } from "../../support/audit-events.js";

const N = 100_000;
const CTRL_HEAP_MIB = 128;
const CLI_HEAP_MIB = 96;
const WS = "ws_exportexportexportex";

function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** Runs the CLI, counting its stdout's lines and bytes (not keeping them), sampling both processes' RSS. */
async function run(
  args: string[],
  env: NodeJS.ProcessEnv,
  ctrlPid: number,
  onLine: (line: string) => void,
): Promise<{ status: number | null; bytes: number; stderr: string; peakCli: number; peakCtrl: number }> {
  const child = spawn(process.execPath, [KRANE_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let bytes = 0;
  let stderr = "";
  let peakCli = 0;
  let peakCtrl = 0;
  const sample = setInterval(() => {
    if (child.pid) peakCli = Math.max(peakCli, rssMiB(child.pid));
    peakCtrl = Math.max(peakCtrl, rssMiB(ctrlPid));
  }, 50);
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout?.on("data", (d: Buffer) => (bytes += d.length));
  const lines = createInterface({ input: child.stdout! });
  lines.on("line", onLine);
  const [status] = (await once(child, "exit")) as [number | null];
  clearInterval(sample);
  return { status, bytes, stderr, peakCli, peakCtrl };
}

describe("audit export of 100,000 events", () => {
  const dir = tempDir("krane-audit-export-");
  const admin = generateToken("user");
  let ctrl: CtrlProcess;
  let baseline = 0;

  before(async () => {
    const db = join(dir.path, "ctrl.db");
    await seedAuditEvents(db, WS, N);
    const tokenFile = join(dir.path, "admin-token");
    writeFileSync(tokenFile, `${admin}\n`, { mode: 0o600 });
    ctrl = await spawnCtrl(["--database", db, "--admin-token-file", tokenFile], {
      NODE_OPTIONS: `--max-old-space-size=${CTRL_HEAP_MIB}`,
    });
    await new Promise((r) => setTimeout(r, 1000));
    baseline = rssMiB(ctrl.child.pid ?? 0);
  });

  after(async () => {
    await ctrl?.stop();
    dir.remove();
  });

  it("streams every event once and in order, in constant memory on both sides", { timeout: 600_000 }, async () => {
    let n = 0;
    let outOfOrder = 0;
    const r = await run(
      ["audit", "export", "--format", "ndjson", "--workspace", WS, "--retry-for", "0"],
      { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: admin, NODE_OPTIONS: `--max-old-space-size=${CLI_HEAP_MIB}` },
      ctrl.child.pid ?? 0,
      (line) => {
        const e = JSON.parse(line) as { seq: number };
        n++;
        if (e.seq !== n) outOfOrder++;
      },
    );
    const mib = r.bytes / 1024 / 1024;
    console.log(
      `export: ${n} events, ${mib.toFixed(1)} MiB of NDJSON; peak RSS ctrl ${r.peakCtrl.toFixed(0)} MiB (${baseline.toFixed(0)} before), CLI ${r.peakCli.toFixed(0)} MiB`,
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(n, N);
    assert.equal(outOfOrder, 0);
    assert.ok(mib > CTRL_HEAP_MIB, `the export (${mib.toFixed(0)} MiB) is larger than either heap`);
    assert.equal(ctrl.child.exitCode, null, "ctrl is still running (it did not run out of heap)");

    const said: string[] = [];
    const v = await run(
      ["audit", "verify", "--workspace", WS, "--retry-for", "0"],
      { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: admin, NODE_OPTIONS: `--max-old-space-size=${CLI_HEAP_MIB}` },
      ctrl.child.pid ?? 0,
      (line) => said.push(line),
    );
    console.log(`verify: peak RSS ctrl ${v.peakCtrl.toFixed(0)} MiB, CLI ${v.peakCli.toFixed(0)} MiB`);
    assert.equal(v.status, 0, v.stderr);
    assert.match(said.join("\n"), /^ok: 100000 events, every hash and link holds, head #100000$/);
  });
});
