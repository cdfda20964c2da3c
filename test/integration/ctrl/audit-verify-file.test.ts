// What an auditor does offline, with the real CLI against a real `krane ctrl serve` process
// (SQLite): `krane audit export` writes a chain to a file, and `krane audit verify --file` checks
// that very file. An untouched export verifies — a workspace's chain (events of the installation
// token and of a workspace token, each with its scope) and the installation's (with events of no
// scope: a caller without a valid token). An edited, a deleted and a swapped line are each named;
// with the chain's head (from `verify -o json`), a line cut off the end is named too.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { krane, spawnCtrl, type CtrlProcess } from "./process.js";
import { tempDir } from "./support.js";

interface Line {
  id: string;
  seq: number;
  method: string;
  hash: string;
  actor: { kind: string; id: string; name: string; scope?: string };
}

describe("krane audit export, then krane audit verify --file", () => {
  const dir = tempDir("krane-audit-file-");
  let ctrl: CtrlProcess;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    ctrl = await spawnCtrl(["--database", join(dir.path, "ctrl.db")]);
    env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: readFileSync(join(dir.path, "admin-token"), "utf8").trim() };
  });
  after(async () => {
    assert.equal(await ctrl.stop(), 0, "ctrl exits cleanly on SIGTERM");
    dir.remove();
  });

  const run = (args: string[], as: NodeJS.ProcessEnv = env) => krane([...args, "--retry-for", "0"], as);
  const ok = (args: string[], as: NodeJS.ProcessEnv = env): string => {
    const r = run(args, as);
    assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stdout}${r.stderr}`);
    return r.stdout;
  };
  /** Writes what `krane audit export` printed to a file, as `> file` would. */
  const exported = (name: string, args: string[]): { path: string; text: string; lines: Line[] } => {
    const text = ok(["audit", "export", ...args]);
    const path = join(dir.path, name);
    writeFileSync(path, text);
    return {
      path,
      text,
      lines: text
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l) as Line),
    };
  };
  const verifyFile = (path: string, ...extra: string[]) => {
    const r = run(["audit", "verify", "--file", path, ...extra]);
    return { status: r.status, said: r.stdout + r.stderr };
  };
  const rewrite = (path: string, text: string, edit: (lines: string[]) => string[]): string => {
    const out = join(dir.path, `tampered-${Date.now()}-${Math.random().toString(36).slice(2)}.ndjson`);
    writeFileSync(out, `${edit(text.trimEnd().split("\n")).join("\n")}\n`);
    return out;
  };

  it("an untouched export verifies: a workspace's chain and the installation's", () => {
    ok(["workspace", "create", "one"]);
    const bot = ok(["api-token", "create", "ci-bot", "--workspace", "one"]).trim();
    ok(["project", "create", "shop"], { ...env, KRANE_TOKEN: bot });
    // Refused without a valid token: an event of nobody (no scope) in the installation's chain.
    assert.notEqual(run(["workspace", "list"], { ...env, KRANE_TOKEN: `krane_user_${"x".repeat(32)}` }).status, 0);

    const one = exported("one.ndjson", ["-w", "one"]);
    const workspace = JSON.parse(ok(["workspace", "get", "one", "-o", "json"])) as { id: string };
    // The export holds the scope every event's hash covers: the admin's and the workspace token's.
    assert.deepEqual(
      one.lines.map((l) => [l.method, l.actor.name, l.actor.scope]),
      [
        ["WorkspaceService/CreateWorkspace", "admin", "installation"],
        ["ApiTokenService/CreateApiToken", "admin", "installation"],
        ["ProjectService/CreateProject", "ci-bot", workspace.id],
      ],
    );
    const v = verifyFile(one.path);
    assert.equal(v.status, 0, v.said);
    assert.match(v.said, /^ok: 3 events, every hash and link holds, through #3 /);

    const inst = exported("installation.ndjson", ["--installation"]);
    assert.ok(
      inst.lines.some((l) => l.actor.kind === "anonymous" && l.actor.scope === undefined),
      "an event without a scope is in it",
    );
    const vi = verifyFile(inst.path);
    assert.equal(vi.status, 0, vi.said);
  });

  it("names an edited, a deleted and a swapped line; with the head, a line cut off the end", () => {
    for (const p of ["cart", "search", "billing"]) ok(["project", "create", p, "-w", "one"]);
    const { path, text, lines } = exported("one-more.ndjson", ["-w", "one"]);
    assert.equal(lines.length, 6);
    const [, second, third, fourth, , last] = lines;
    assert.ok(second && third && fourth && last);

    // Edited: a line's method.
    let r = verifyFile(
      rewrite(path, text, (ls) =>
        ls.map((l, i) => (i === 2 ? l.replace(third.method, "ProjectService/GetProject") : l)),
      ),
    );
    assert.equal(r.status, 1, r.said);
    assert.match(r.said, new RegExp(`event ${third.id} \\(#3\\) does not match its hash: it was edited`));
    // Edited: the scope taken off a line (what an export without scopes looked like).
    r = verifyFile(
      rewrite(path, text, (ls) =>
        ls.map((l, i) => {
          if (i !== 1) return l;
          const o = JSON.parse(l) as Line;
          delete o.actor.scope;
          return JSON.stringify(o);
        }),
      ),
    );
    assert.equal(r.status, 1, r.said);
    assert.match(r.said, new RegExp(`event ${second.id} \\(#2\\) does not match its hash`));

    // Deleted: a line in the middle.
    r = verifyFile(rewrite(path, text, (ls) => ls.filter((_, i) => i !== 2)));
    assert.equal(r.status, 1, r.said);
    assert.match(
      r.said,
      new RegExp(`event #3 is missing between ${second.id} \\(#2\\) and ${fourth.id} \\(#4\\): deleted`),
    );

    // Swapped: two lines change places.
    r = verifyFile(rewrite(path, text, (ls) => [ls[0], ls[2], ls[1], ...ls.slice(3)] as string[]));
    assert.equal(r.status, 1, r.said);
    assert.match(r.said, new RegExp(`event ${second.id} \\(#2\\) comes after ${third.id} \\(#3\\): out of order`));

    // The head an auditor keeps from an online check; with it, a line cut off the end is named.
    const online = JSON.parse(ok(["audit", "verify", "-w", "one", "-o", "json"])) as {
      head: { seq: number; hash: string };
      problems: unknown[];
    };
    assert.deepEqual(online.problems, []);
    assert.deepEqual(online.head, { seq: 6, hash: last.hash });
    const head = ["--head-seq", String(online.head.seq), "--head-hash", online.head.hash];
    r = verifyFile(path, ...head);
    assert.equal(r.status, 0, r.said);
    assert.match(r.said, /^ok: 6 events, every hash and link holds, head #6$/m);
    r = verifyFile(
      rewrite(path, text, (ls) => ls.slice(0, -1)),
      ...head,
    );
    assert.equal(r.status, 1, r.said);
    assert.match(r.said, /events #6–#6 are missing at the end of the chain \(the head is #6\): deleted/);

    // Half a head is refused, naming the flags.
    r = verifyFile(path, "--head-seq", "6");
    assert.notEqual(r.status, 0);
    assert.match(r.said, /--head-seq and --head-hash: give both/);
  });
});
