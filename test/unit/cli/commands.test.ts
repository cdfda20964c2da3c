// The command tree after the split by noun: every command users and scripts had is still
// there, and `krane --help`, `krane version` and `krane status` load neither the agent, the
// store, the cluster harness nor their libraries (the build runs a command's code only when it
// runs). Checked on the sources through tsx and, when built, on dist/ as shipped.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { buildIsFresh } from "../../../scripts/freshness.mjs";

const root = new URL("../../../", import.meta.url).pathname;
const hook = join(root, "test/support/record-imports.mjs");
const dir = mkdtempSync(join(tmpdir(), "krane-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI (sources through tsx, or dist/) and returns its output and the modules it loaded. */
function krane(
  mode: "source" | "dist",
  args: string[],
  env: NodeJS.ProcessEnv = {},
): { status: number | null; stdout: string; stderr: string; loaded: string[] } {
  const record = join(dir, `imports-${Math.random().toString(36).slice(2)}.txt`);
  const entry =
    mode === "source" ? ["--import", "tsx", join(root, "src/cli/main.ts")] : [join(root, "dist/cli/main.js")];
  const res = spawnSync(process.execPath, ["--import", hook, ...entry, ...args], {
    env: { ...process.env, KRANE_TOKEN: "", KRANE_CTRL_URL: "", ...env, RECORD_IMPORTS: record },
    encoding: "utf8",
    timeout: 60_000,
  });
  let loaded: string[] = [];
  try {
    loaded = readFileSync(record, "utf8").split("\n").filter(Boolean);
  } catch {
    // nothing recorded
  }
  return { status: res.status, stdout: res.stdout, stderr: res.stderr, loaded };
}

/** Modules that only the servers and the local cluster need. */
const SERVER_ONLY = [
  /\/(src|dist)\/agent\//,
  /\/(src|dist)\/ctrl\//,
  /\/(src|dist)\/cluster\//,
  /\/(src|dist)\/dev\//,
  /\/(src|dist)\/kube\//,
  /\/node_modules\/(@kubernetes\/client-node|better-sqlite3|pg|kysely|pino|prom-client|yaml)\//,
];
/** What a command that does not talk to ctrl needs neither. */
const CLIENT = [/\/node_modules\/(@connectrpc|@bufbuild)\//, /\/(src|dist)\/gen\//, /\/node_modules\/cli-table3\//];

function assertNotLoaded(loaded: string[], patterns: RegExp[], what: string): void {
  assert.ok(loaded.length > 5, `the hook recorded modules (${loaded.length})`);
  const bad = loaded.filter((u) => patterns.some((p) => p.test(u)));
  assert.deepEqual([...new Set(bad)], [], `${what} loaded modules it does not need`);
}

const modes: ("source" | "dist")[] = ["source", "dist"];
for (const mode of modes) {
  const skip =
    mode === "dist" && !buildIsFresh(root)
      ? "dist/ is not built or older than src/ (npm run build; npm test builds first)"
      : false;
  describe(`lazy loading (${mode})`, { skip }, () => {
    it("krane --help loads only commander and the command definitions", () => {
      const r = krane(mode, ["--help"]);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /Usage: krane/);
      assertNotLoaded(r.loaded, [...SERVER_ONLY, ...CLIENT], "--help");
    });

    it("krane version loads no client, server or cluster code", () => {
      const r = krane(mode, ["version"]);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^krane\s+\d+\.\d+\.\d+/m);
      assertNotLoaded(r.loaded, [...SERVER_ONLY, ...CLIENT], "version");
    });

    // Port 1 refuses at once: a command runs its whole client path up to the call.
    const unreachable = ["--ctrl-url", "http://127.0.0.1:1", "--token", "t", "--workspace", "w", "--retry-for", "0"];
    const refused = (r: { status: number | null; stderr: string }): void => {
      assert.equal(r.status, 69, "the outage exit code");
      assert.match(
        r.stderr,
        /unavailable: ctrl is not reachable at http:\/\/127\.0\.0\.1:1 .*ECONNREFUSED.*is it running\?/,
      );
    };

    it("krane status (tables) loads its light JSON client: no Connect, no protobuf-es, no generated code", () => {
      const r = krane(mode, ["status", "shop/prod", ...unreachable]);
      refused(r);
      assert.ok(
        r.loaded.some((u) =>
          (mode === "dist" ? /\/dist\/cli\/status-table\.js$/ : /\/src\/cli\/json-call\.ts$/).test(u),
        ),
        "the JSON client was loaded",
      );
      assertNotLoaded(
        r.loaded,
        [...SERVER_ONLY, /@connectrpc/, /@bufbuild/, /user-client\.(js|ts)$/, /_pb\.(js|ts)$/],
        "status",
      );
      if (mode === "dist") {
        // The table form is one bundle (status-table.js, with cli-table3): no package loaded
        // module by module, and no per-file copy of what the bundle holds.
        assertNotLoaded(r.loaded, [/\/node_modules\//, /\/dist\/cli\/(json-call|calls|status-view)\.js$/], "status");
      }
    });

    it("krane status -o json loads the Connect client but nothing of the servers or the cluster", () => {
      const r = krane(mode, ["status", "shop/prod", "-o", "json", ...unreachable]);
      refused(r);
      assert.ok(
        r.loaded.some((u) => /@connectrpc|user-client\.js|user-client\.ts/.test(u)),
        "the client was loaded",
      );
      assertNotLoaded(r.loaded, SERVER_ONLY, "status -o json");
      if (mode === "dist") {
        // One copy of protobuf-es and of the API: the CLI's build (user-client.js and the
        // generated modules split with it), not the per-file dist/gen/ and node_modules copies.
        assert.ok(
          r.loaded.some((u) => /\/dist\/cli\/gen\/krane\/ctrl\/v1\/events_pb\.js$/.test(u)),
          "the CLI's own events_pb",
        );
        assertNotLoaded(r.loaded, [/\/node_modules\/@bufbuild\//, /\/dist\/gen\//], "status -o json");
      }
    });
  });
}

describe("the build's command listing", () => {
  const skip = !buildIsFresh(root)
    ? "dist/ is not built or older than src/ (npm run build; npm test builds first)"
    : false;
  it(
    "the built CLI, defining one group in full and the others from the listing, helps as the sources",
    { skip },
    () => {
      // The sources have no listing: they define every command; the build defines only the one run.
      for (const args of [
        ["--help"],
        ["help"],
        ["help", "status"],
        ["deploy", "--help"],
        ["rollout", "--help"],
        ["nosuch"],
      ]) {
        const full = krane("source", args);
        const lazy = krane("dist", args);
        assert.equal(lazy.stdout, full.stdout, `krane ${args.join(" ")}: stdout`);
        assert.equal(lazy.stderr, full.stderr, `krane ${args.join(" ")}: stderr`);
        assert.equal(lazy.status, full.status, `krane ${args.join(" ")}: exit code`);
      }
      const listing = JSON.parse(readFileSync(join(root, "dist/cli/commands.json"), "utf8")) as { name: string }[];
      const top = [...krane("source", ["--help"]).stdout.matchAll(/^ {2}([a-z][a-z-]*)(?: |$)/gm)].map((m) => m[1]);
      assert.deepEqual(
        listing.map((l) => l.name),
        top.filter((n) => n !== "help"),
        "the listing has every top-level command, in order",
      );
    },
  );
});

describe("the command tree", () => {
  it("keeps every command", () => {
    const r = krane("source", ["--help"]);
    const expected: Record<string, string[]> = {
      "": [
        "ctrl",
        "agent",
        "cluster",
        "dev",
        "workspace",
        "project",
        "env",
        "deploy",
        "deployments",
        "scale",
        "rollout",
        "status",
        "events",
        "logs",
        "region",
        "cluster-token",
        "api-token",
        "member",
        "service-account",
        "login",
        "logout",
        "session",
        "version",
        "config",
        "secret",
        "release",
        "job",
        "endpoint",
        "domain",
        "preview",
        "audit",
        "schema",
        "plan",
        "apply",
        "export",
      ],
      ctrl: ["serve", "rotate-key"],
      cluster: ["build", "up", "down", "status", "env"],
      workspace: ["create", "list", "get", "delete"],
      project: ["create", "list", "get", "delete"],
      env: ["create", "list", "get", "update", "delete"],
      config: ["set", "unset", "list"],
      secret: ["set", "unset", "list"],
      release: ["apply", "get", "list", "delete"],
      job: ["put", "list", "delete"],
      deployments: ["list", "get", "delete"],
      rollout: ["plan", "pause", "resume", "history", "undo", "restart", "status"],
      region: ["create", "list", "clusters"],
      "cluster-token": ["create", "revoke"],
      "api-token": ["create", "list", "revoke"],
      member: ["list", "add", "set-role", "remove"],
      "service-account": ["create", "list", "delete"],
      session: ["list", "revoke"],
      endpoint: ["set", "list", "delete"],
      domain: ["add", "list", "verify", "remove"],
      preview: ["create", "list", "delete", "approve", "limits", "hook"],
      "preview hook": ["add", "list", "delete"],
      audit: ["export", "verify"],
    };
    for (const [group, names] of Object.entries(expected)) {
      const help = group === "" ? r.stdout : krane("source", [...group.split(" "), "--help"]).stdout;
      const listed = [...help.matchAll(/^ {2}([a-z][a-z-]*)(?: |$)/gm)].map((m) => m[1]);
      for (const n of names) assert.ok(listed.includes(n), `${group || "krane"} lists ${n}: ${listed.join(", ")}`);
    }
  });

  it("--version prints one line", () => {
    const r = krane("source", ["--version"]);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /^krane \d+\.\d+\.\d+ \(commit dev, running from source\)\n$/);
  });

  it("a user command without a token says how to give one", () => {
    const r = krane("source", ["workspace", "list"], { KRANE_CONFIG: join(dir, "no-config.json") });
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      /^krane: no API token: pass --token or set KRANE_TOKEN, or sign in with krane login --ctrl-url http:\/\/127.0.0.1:7070$/m,
    );
  });
});
