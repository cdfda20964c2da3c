// `krane rollout plan`: the command function and the real executable (file and stdin input,
// exit code 2 naming the field on bad input).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Command } from "commander";
import { runRolloutPlan } from "../../../src/cli/rollout-plan.js";
import { registerRolloutPlanCommand, rolloutCommand } from "../../../src/cli/rollout.js";
import { deployment, input, rev } from "./helpers.js";

const example = JSON.stringify(
  input(deployment("v2", { status: { replicas: 10, updatedReplicas: 0, readyReplicas: 10, availableReplicas: 10 } }), [
    rev("v1", 1, 10, { desired: 10, max: 13 }),
    rev("v2", 2, 0),
  ]),
);

describe("runRolloutPlan", () => {
  it("prints the engine's output as JSON with exit code 0", () => {
    const r = runRolloutPlan(example);
    assert.equal(r.exitCode, 0);
    const out = JSON.parse(r.stdout) as {
      revisions: { name: string; replicas: number }[];
      events: { message: string }[];
    };
    assert.deepEqual(
      out.revisions.map((x) => x.replicas),
      [10, 3],
    );
    assert.equal(out.events[0]?.message, "Scaled up replica set v2 from 0 to 3");
  });

  it("exits 2 naming the field for bad input", () => {
    const bad = JSON.parse(example) as { deployment: { replicas: number } };
    bad.deployment.replicas = -1;
    const r = runRolloutPlan(JSON.stringify(bad));
    assert.equal(r.exitCode, 2);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /deployment\.replicas: must not be negative/);
  });

  it("exits 2 for malformed JSON", () => {
    const r = runRolloutPlan("{");
    assert.equal(r.exitCode, 2);
    assert.match(r.stderr, /malformed JSON/);
  });
});

describe("the rollout command group", () => {
  it("is created once and shared by later subcommands", () => {
    const program = new Command();
    registerRolloutPlanCommand(program);
    const group = rolloutCommand(program);
    group.command("status");
    assert.equal(program.commands.filter((c) => c.name() === "rollout").length, 1);
    assert.deepEqual(
      group.commands.map((c) => c.name()),
      ["plan", "status"],
    );
  });
});

describe("krane rollout plan (process)", () => {
  const dir = mkdtempSync(join(tmpdir(), "krane-rollout-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  function krane(args: string[], stdin?: string) {
    return spawnSync(process.execPath, ["bin/krane.js", "rollout", "plan", ...args], {
      input: stdin ?? "",
      encoding: "utf8",
    });
  }

  it("reads --input FILE", () => {
    const file = join(dir, "in.json");
    writeFileSync(file, example);
    const r = krane(["--input", file]);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { target: string; requeueAfterSeconds: number | null };
    assert.equal(out.target, "v2");
    assert.equal(out.requeueAfterSeconds, null);
  });

  it("reads stdin and exits 2 naming the field on bad input", () => {
    const bad = JSON.parse(example) as { deployment: { strategy: unknown } };
    bad.deployment.strategy = { type: "RollingUpdate", rollingUpdate: { maxSurge: "250%" } };
    const r = krane([], JSON.stringify(bad));
    assert.equal(r.status, 2);
    assert.match(r.stderr, /deployment\.strategy\.rollingUpdate\.maxSurge: percentage out of range/);
  });

  it("exits 2 on malformed JSON from stdin", () => {
    const r = krane([], "not json");
    assert.equal(r.status, 2);
    assert.match(r.stderr, /input: malformed JSON/);
  });
});
