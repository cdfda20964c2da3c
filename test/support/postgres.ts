// A throwaway PostgreSQL server for tests: initdb into a temporary directory, start it on a free
// loopback port with trust auth, hand out fresh databases, and stop it (and remove its files)
// when done. Uses the Debian binaries in /usr/lib/postgresql/<version>/bin; when running as root
// the server runs as the `postgres` user, which PostgreSQL requires.
import { execFileSync, spawnSync } from "node:child_process";
import { appendFileSync, chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort } from "./ports.js";

export interface TestPostgres {
  /** A connection URL for a new, empty database. */
  newDatabase(): Promise<string>;
  /** The URL of the server's maintenance database. */
  adminUrl: string;
  /** Stops the server as an outage would (fast shutdown: sessions are terminated), keeping its data. */
  halt(): Promise<void>;
  /** Starts a halted server again, on the same port, with the same data. */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

function findBinDir(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const v = versions[0];
  if (v === undefined)
    throw new Error("PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)");
  return join(root, v, "bin");
}

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;

function postgresIds(): { uid: number; gid: number } {
  const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
  return { uid, gid };
}

function run(bin: string, args: string[]): void {
  const cmd = isRoot ? "runuser" : bin;
  const full = isRoot ? ["-u", "postgres", "--", bin, ...args] : args;
  const res = spawnSync(cmd, full, { encoding: "utf8" });
  if (res.status !== 0) throw new Error(`${bin} ${args.join(" ")} failed: ${res.stderr || res.stdout}`);
}

export interface PostgresOptions {
  /**
   * Listen on this address too and trust clients from `trust` (a CIDR): pods of a local cluster
   * with real nodes reach this machine at its end of their link (LocalCluster.realNodes.hostIp).
   */
  also?: { listen: string; trust: string };
}

export async function startPostgres(opts: PostgresOptions = {}): Promise<TestPostgres> {
  const bin = findBinDir();
  const dir = mkdtempSync(join(tmpdir(), "krane-pg-"));
  const data = join(dir, "data");
  if (isRoot) {
    const { uid, gid } = postgresIds();
    chownSync(dir, uid, gid);
  }
  chmodSync(dir, 0o700);
  run(join(bin, "initdb"), ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"]);
  if (opts.also) appendFileSync(join(data, "pg_hba.conf"), `host all all ${opts.also.trust} trust\n`);
  const listen = ["127.0.0.1", ...(opts.also ? [opts.also.listen] : [])].join(",");
  let port = 0;
  let started = false;
  const startOn = (p: number): void =>
    run(join(bin, "pg_ctl"), [
      "-D",
      data,
      "-w",
      "-t",
      "60",
      "-l",
      join(dir, "log"),
      "start",
      "-o",
      `-p ${p} -k ${dir} -c listen_addresses=${listen} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`,
    ]);
  for (let attempt = 0; attempt < 5 && !started; attempt++) {
    port = await freePort();
    try {
      startOn(port);
      started = true;
    } catch (err) {
      if (attempt === 4) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }
  const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let stopped = false;
  const stopNow = (): void => {
    if (stopped) return;
    stopped = true;
    try {
      // A halted server has nothing to stop.
      if (existsSync(join(data, "postmaster.pid")))
        run(join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "-w", "stop"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  // A test process that ends without running its `after` hooks still takes its server along.
  process.once("exit", stopNow);
  let n = 0;
  return {
    adminUrl,
    async newDatabase() {
      const name = `krane_test_${process.pid}_${++n}`;
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`CREATE DATABASE ${name}`);
      } finally {
        await c.end();
      }
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    async halt() {
      run(join(bin, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "stop"]);
    },
    async resume() {
      startOn(port);
    },
    async stop() {
      process.off("exit", stopNow);
      stopNow();
    },
  };
}
